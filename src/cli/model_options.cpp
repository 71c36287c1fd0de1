#include "cli/model_options.h"

#include <filesystem>

#include "cli/progress_display.h"
#include "store/index/model_store_update.h"

namespace cherenkov::cli {

void add_model_options(CLI::App* app, ModelOptions& options) {
    app->add_option(
           "model", options.model,
           "Model: alias, ID, hf:// or disk:// URI, commit prefix, or a packed store directory")
        ->required();
    app->add_option("--root", options.root, "Data root of the model index (default: XDG paths)");
    app->add_option("--experts", options.experts,
                    "Routed expert precision: 4, 3 or 2 bits (default 4)")
        ->check(CLI::IsMember({4, 3, 2}));
    app->add_option("--threads", options.threads, "CPU threads (default: every online CPU)")
        ->check(CLI::NonNegativeNumber);
    app->add_option(
           "--miss-experts", options.miss_experts,
           "Precision of unpredicted expert misses (mixed mode with Q4 residents): 4, 3 or 2")
        ->check(CLI::IsMember({0, 4, 3, 2}));
    app->add_option("--pool-gb", options.pool_gb,
                    "Expert cache size: N decimal GB, max, or adaptive (default; from available "
                    "memory); 0: no cache; mapped (cpu): no cache, the expert table used in place "
                    "from the page cache (needs RAM for it)");
    app->add_option("--cache-policy", options.cache_policy,
                    "Expert replacement: lru (default) or frequency")
        ->check(CLI::IsMember({"lru", "frequency"}));
    app->add_option("--cut-weak", options.cut_weak,
                    "Skip late weak experts below this routing weight (default 0: off; output "
                    "becomes timing-dependent)");
    app->add_option("--io-threads", options.io_threads,
                    "Expert reads in flight (default: half the CPUs, 4 to 8)")
        ->check(CLI::PositiveNumber);
    app->add_option("--backend", options.backend,
                    "Where the model runs: cpu, cuda, or auto (default: cuda when a device is "
                    "present)")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    app->add_flag("--check", options.check,
                  "Also run the CPU reference and report where the backend diverges (slow)");
    app->add_option("--host-pool-gb", options.host_pool_gb,
                    "With --backend cuda: host expert cache behind the device pool (the RAM "
                    "tier): N decimal GB, max, adaptive, staging (default: a few layer-steps), "
                    "or mapped (the expert table mapped, page-locked and copied from in place; "
                    "needs RAM for it)");
    app->add_flag("--buffered-io", options.buffered_io,
                  "Read experts through the page cache instead of O_DIRECT");
    app->add_flag("!--no-build-missing-store", options.build_missing_store,
                  "Fail instead of building a missing low-bit expert table at load "
                  "(server: build_missing_store = false)");
    // Range-checked in load_model (engine::validate_load_options), so every caller of the
    // engine gets the same message naming the flag.
    app->add_option("--prefill-quantum", options.prefill_quantum,
                    "Most prompt tokens per prefill call, 1-65536 (default 256); memory for "
                    "that chunk's scratch is kept outside the expert pool, and chunks shrink "
                    "when the device cannot hold it");
}

OpenedModel load_model(const ModelOptions& options) {
    engine::LoadOptions load;
    load.expert_bits = options.experts;
    load.threads = options.threads;
    load.miss_bits = options.miss_experts;
    load.pool = options.pool_gb;
    load.policy = options.cache_policy;
    load.cut_weak = options.cut_weak;
    load.io_threads = options.io_threads;
    load.max_rows = options.max_rows;
    load.backend = options.backend;
    load.check = options.check;
    load.host_pool = options.host_pool_gb;
    load.buffered_io = options.buffered_io;
    load.max_ctx = options.max_ctx;
    load.prefill_quantum = options.prefill_quantum;
    load.draft_head = options.drafts > 0;
    load.build_missing_store = options.build_missing_store;
    engine::validate_load_options(load);
    OpenedModel opened;
    // Tables built at load report progress on stderr, like `prepare`.
    ProgressDisplay display;
    load.index = store::index_options_from_environment(options.root, "");
    load.index.events = display.callback();
    opened.resolved = store::resolve_model(options.model, load.index);
    // Metadata the prompt checks below read (tokenizer, template) is repaired first; missing
    // expert tables are built by load(), after those checks.
    if (load.build_missing_store) store::complete_resolved_store(opened.resolved, {}, load.index);
    load.store_dir = opened.resolved.store_dir;
    load.resolved = &opened.resolved;
    opened.loaded = engine::LoadedModel::load(load);
    return opened;
}

}  // namespace cherenkov::cli

namespace cherenkov::cli {

std::string text_files_dir(const std::string& model) {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const char* name :
         {"tokenizer.json", "tokenizer_config.json", "vocab.json", "chat_template.jinja"}) {
        if (fs::exists(fs::path(model) / name, ec)) return model;
    }
    return store::resolve_model(model, store::index_options_from_environment("", "")).store_dir;
}

}  // namespace cherenkov::cli
