#include "cli/model_options.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "cli/flag_range.h"
#include "cli/progress_display.h"
#include "engine/cuda/cpu_experts.h"
#include "engine/generate/context_budget.h"
#include "store/index/model_store_update.h"

namespace cherenkov::cli {

namespace {

// A pool flag parsed into its typed value as it is read: a malformed value is a usage error
// (exit 2) with the parser's message naming the flag and the value.
void add_pool_option(CLI::App* app, const std::string& name, engine::PoolFlag flag,
                     engine::PoolSetting& setting, const std::string& description) {
    app->add_option_function<std::string>(
        name,
        [flag, &setting](const std::string& text) {
            try {
                setting = engine::parse_pool_setting(text, flag);
            } catch (const Error& e) {
                throw CLI::ValidationError(e.what());
            }
        },
        description);
}

}  // namespace

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
        ->check(at_least(0));
    app->add_option("--cpu-activations", options.cpu_activations,
                    "Activations in the CPU's 4-bit matmuls: f32 (the reference order) or q8 "
                    "(int8 with a scale per group, integer products: faster, about an 8-bit "
                    "rounding of each activation); auto (default): f32 on the CPU backend, q8 "
                    "for the experts the CUDA backend computes on the CPU")
        ->check(CLI::IsMember({"auto", "f32", "q8"}));
    app->add_option(
           "--miss-experts", options.miss_experts,
           "Precision of unpredicted expert misses (mixed mode with Q4 residents): 4, 3 or 2")
        ->check(CLI::IsMember({0, 4, 3, 2}));
    add_pool_option(app, "--pool-gb", engine::PoolFlag::Pool, options.pool,
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
        ->check(at_least(1));
    app->add_option("--backend", options.backend,
                    "Where the model runs: cpu, cuda, or auto (default: cuda when a device is "
                    "present)")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    app->add_flag("--check", options.check,
                  "Also run the CPU reference and report where the backend diverges (slow)");
    add_pool_option(app, "--host-pool-gb", engine::PoolFlag::HostPool, options.host_pool,
                    "With --backend cuda: host expert cache behind the device pool (the RAM "
                    "tier): N decimal GB, max, adaptive, staging (default: a few layer-steps), "
                    "or mapped (the expert table mapped, page-locked and copied from in place; "
                    "needs RAM for it)");
    app->add_option("--cpu-experts", options.cpu_experts,
                    "With --backend cuda: decode misses of the device pool computed on the CPU "
                    "(--threads, --cpu-activations) while the others are copied: auto (default: "
                    "the split that balances both sides, measured), off, or a share of the "
                    "misses from 0 to 1")
        ->check(CLI::Validator(
            [](const std::string& text) {
                using engine::cuda::CpuExpertsSetting;
                return CpuExpertsSetting::try_parse(text)
                           ? std::string()
                           : "'" + text + "' is not " + CpuExpertsSetting::kExpected;
            },
            "off|auto|SHARE"));
    app->add_flag("--buffered-io", options.buffered_io,
                  "Read experts through the page cache instead of O_DIRECT");
    app->add_flag("!--no-build-missing-store", options.build_missing_store,
                  "Fail instead of building a missing low-bit expert table at load "
                  "(server: build_missing_store = false)");
    app->add_flag("--repack", options.repack,
                  "Rebuild the low-bit expert table this run reads (--experts 3|2, "
                  "--miss-experts 3|2) from experts.bin at startup, published as a new store");
    // Range-checked as the flag is read (a usage error whose message gives the range), then
    // made into the engine's typed value, which nothing below checks again.
    app->add_option_function<int64_t>(
           "--prefill-quantum",
           [&options](int64_t rows) { options.prefill_quantum = engine::PrefillQuantum::of(rows); },
           "Most prompt tokens per prefill call, 1-65536 (default 512; with CUDA grown, "
           "where the device has the memory, up to 4096 when an explicit --pool-gb holds "
           "less than the expert table, up to 2048 when the pool holds all of it); memory "
           "for that chunk's scratch is kept outside the expert pool, and chunks shrink when "
           "the device cannot hold it")
        ->check(in_range(1, engine::kMaxPrefillQuantum));
    // Parsed as the flags are read: a bad setting is a usage error (exit 2) naming the key.
    app->add_option_function<std::vector<std::string>>(
           "--tuning",
           [&options](const std::vector<std::string>& settings) {
               try {
                   options.tuning = engine::parse_tuning(settings);
               } catch (const Error& e) {
                   throw CLI::ValidationError(e.what());
               }
           },
           "Developer A/B switch of a fast path, key=value (repeatable; keys: "
           "docs/cuda-backend.md, \"Tuning\")")
        ->allow_extra_args(false)
        ->type_name("KEY=VALUE");
}

namespace {

// The store's parsed config.json, or nullopt when it has none (then LoadedModel::load reports
// what the directory is instead).
std::optional<model_data::qwen4_exp::Config> read_store_config(const std::string& store_dir) {
    const std::string path = store_dir + "/config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    return model_data::qwen4_exp::parse_config(read_text_file(path), path);
}

}  // namespace

OpenedModel load_model(const ModelOptions& options, const BeforeLoad& before_load) {
    engine::LoadOptions load;
    load.expert_bits = options.experts;
    load.threads = options.threads;
    if (options.cpu_activations != "auto") {
        load.cpu_activations =
            engine::parse_activation_precision(options.cpu_activations, "--cpu-activations");
    }
    load.miss_bits = options.miss_experts;
    load.pool = options.pool;
    load.policy = options.cache_policy;
    load.cut_weak = options.cut_weak;
    load.io_threads = options.io_threads;
    load.max_rows = options.max_rows;
    load.backend = options.backend;
    load.check = options.check;
    load.host_pool = options.host_pool;
    load.cpu_experts = engine::cuda::CpuExpertsSetting::parse(options.cpu_experts, "--cpu-experts");
    load.buffered_io = options.buffered_io;
    load.max_ctx = options.max_ctx;
    load.prefill_quantum = options.prefill_quantum;
    load.draft_head = options.drafts > 0;
    load.build_missing_store = options.build_missing_store;
    load.repack = options.repack;
    load.tuning = options.tuning;
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
    const std::optional<model_data::qwen4_exp::Config> config = read_store_config(load.store_dir);
    if (config) {
        if (before_load) load.max_ctx = before_load(load.store_dir, *config);
        const std::string subject = options.max_ctx_subject
                                        ? options.max_ctx_subject(load.max_ctx)
                                        : "--max-ctx " + std::to_string(load.max_ctx);
        // The device keeps one more row of snapshots than a step verifies (cuda_model.cu).
        engine::check_context_capacity(*config, load.max_ctx,
                                       load.draft_head ? config->mtp_num_hidden_layers : 0,
                                       options.max_rows + 1, engine::available_memory_bytes(),
                                       subject, load.store_dir + "/config.json");
    }
    load.config = config ? &*config : nullptr;
    opened.loaded = engine::LoadedModel::load(load);
    // Only without config.json, where load() has failed already in practice.
    if (!config && before_load) before_load(opened.store_dir(), opened.loaded->weights().config);
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
