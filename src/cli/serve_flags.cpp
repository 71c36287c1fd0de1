#include "cli/serve_flags.h"

#include <charconv>
#include <cstdlib>
#include <functional>

#include "base/error.h"
#include "cli/flag_range.h"
#include "serving/config/settings_catalog.h"

namespace cherenkov::cli {
namespace {

using serving::config::SettingValue;

// A float flag as the double its shortest text reads back as (0.1F is 0.1, as in the file).
SettingValue real(float value) {
    char text[32];
    const auto result = std::to_chars(text, text + sizeof text, value);
    return std::strtod(std::string(text, result.ptr).c_str(), nullptr);
}

struct FlagReader {
    const char* flag;
    std::function<SettingValue(const ServeArgs&)> read;
};

// How each flag's parsed value reads as its setting's value (the catalogue names the key).
const std::vector<FlagReader>& flag_readers() {
    using A = const ServeArgs&;
    static const std::vector<FlagReader> readers = {
        {"--host", [](A a) -> SettingValue { return a.host; }},
        {"--port", [](A a) -> SettingValue { return int64_t{a.port}; }},
        {"--root", [](A a) -> SettingValue { return a.model.root; }},
        {"--socket", [](A a) -> SettingValue { return a.socket; }},
        {"--max-ctx", [](A a) -> SettingValue { return a.max_ctx; }},
        {"--backend", [](A a) -> SettingValue { return a.model.backend; }},
        {"--threads", [](A a) -> SettingValue { return int64_t{a.model.threads}; }},
        {"--cpu-activations", [](A a) -> SettingValue { return a.model.cpu_activations; }},
        {"--max-active", [](A a) -> SettingValue { return int64_t{a.max_active}; }},
        {"--max-queued", [](A a) -> SettingValue { return int64_t{a.max_queued}; }},
        {"--prefill-quantum", [](A a) -> SettingValue { return a.model.prefill_quantum.rows(); }},
        {"--prefill-chunk-seconds", [](A a) -> SettingValue { return a.prefill_chunk_seconds; }},
        {"--state-memory-gb", [](A a) -> SettingValue { return a.state_memory_gb; }},
        {"--experts", [](A a) -> SettingValue { return int64_t{a.model.experts}; }},
        {"--miss-experts", [](A a) -> SettingValue { return int64_t{a.model.miss_experts}; }},
        {"--pool-gb", [](A a) -> SettingValue { return engine::pool_setting_text(a.model.pool); }},
        {"--host-pool-gb",
         [](A a) -> SettingValue { return engine::pool_setting_text(a.model.host_pool); }},
        {"--cpu-experts", [](A a) -> SettingValue { return a.model.cpu_experts; }},
        {"--cache-policy", [](A a) -> SettingValue { return a.model.cache_policy; }},
        {"--cut-weak", [](A a) -> SettingValue { return real(a.model.cut_weak); }},
        {"--io-threads", [](A a) -> SettingValue { return int64_t{a.model.io_threads}; }},
        {"--buffered-io", [](A a) -> SettingValue { return a.model.buffered_io; }},
        {"--no-build-missing-store",
         [](A a) -> SettingValue { return a.model.build_missing_store; }},
        {"--drafts", [](A a) -> SettingValue { return int64_t{a.drafts}; }},
        {"--prefix-cache-mb", [](A a) -> SettingValue { return a.prefix_cache_mb; }},
        {"--prefix-cache-entries", [](A a) -> SettingValue { return a.prefix_cache_entries; }},
        {"--prefix-cache-idle-seconds",
         [](A a) -> SettingValue { return a.prefix_cache_idle_seconds; }},
        {"--prefix-cache-interval", [](A a) -> SettingValue { return a.prefix_cache_interval; }},
        {"--max-sessions", [](A a) -> SettingValue { return a.max_sessions; }},
        {"--session-memory-mb", [](A a) -> SettingValue { return a.session_memory_mb; }},
        {"--session-idle-seconds", [](A a) -> SettingValue { return a.session_idle_seconds; }},
        {"--no-eos", [](A a) -> SettingValue { return !a.no_eos; }},
    };
    return readers;
}

}  // namespace

void add_serve_flags(CLI::App* app, ServeArgs& args) {
    add_model_options(app, args.model);
    // MODEL may come from the configuration file (server.model, server.model_dir) instead.
    app->get_option("model")->required(false)->description(
        "Model: alias, ID, hf:// or disk:// URI, commit prefix, or a packed store directory "
        "(default: server.model or server.model_dir from the configuration, else the default "
        "model)");
    app->add_option("--config", args.config,
                    "Configuration file (TOML; default: the config file `cherenkov paths` names, "
                    "when it exists); explicit flags override it");
    app->add_flag("--print-config", args.print_config,
                  "Print the resolved settings (TOML, with where each came from) and exit "
                  "without loading the model");
    app->add_option("--socket", args.socket,
                    "Control socket (default: $TMPDIR/cherenkov-UID/control.sock)");
    app->add_option("--host", args.host, "Address to listen on (default 127.0.0.1)");
    app->add_option("--port", args.port, "Port to listen on, 0-65535 (default 8080; 0: any)")
        ->check(CLI::Range(0, 65535));
    app->add_option("--max-ctx", args.max_ctx,
                    "Most tokens of prompt, output and draft headroom per request (default 4096)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
    app->add_option("--drafts", args.drafts,
                    "MTP drafts per step: 0, 1 or 2 (default 2, adaptive; greedy requests only)")
        ->check(CLI::IsMember({0, 1, 2}));
    app->add_flag("--no-eos", args.no_eos,
                  "Do not stop requests at EOS (for benchmarks: every request runs to max_tokens; "
                  "--no-eos=false restores the default)");
    app->add_option("--max-active", args.max_active,
                    "Requests interleaved at once, 1-64 (default 2)")
        ->check(CLI::Range(1, 64));
    app->add_option("--max-queued", args.max_queued,
                    "Requests waiting for admission before 503, 0-4096 (default 16)")
        ->check(CLI::Range(0, 4096));
    app->add_option("--prefill-chunk-seconds", args.prefill_chunk_seconds,
                    "While other requests wait, aim prefill chunks at this many seconds, 0-60 "
                    "(default 0.5; 0: fixed chunks of min(128, quantum))")
        ->check(CLI::Range(0.0, 60.0));
    app->add_option("--state-memory-gb", args.state_memory_gb,
                    "Sequence-state memory admission may reserve, decimal GB, or auto (default: "
                    "a quarter of the memory available at startup)");
    app->add_option("--prefix-cache-mb", args.prefix_cache_mb,
                    "Host memory for prefix checkpoints, MiB, 0-1048576 (default 512; 0 turns "
                    "the prefix cache off)")
        ->check(in_range(0, int64_t{1} << 20));
    app->add_option("--prefix-cache-entries", args.prefix_cache_entries,
                    "Most prefix checkpoints kept, 1-100000 (default 64)")
        ->check(in_range(1, 100000));
    app->add_option("--prefix-cache-idle-seconds", args.prefix_cache_idle_seconds,
                    "Drop prefix checkpoints unused this long, 0-31536000 (default 1800; 0: never)")
        ->check(in_real_range(0.0, 31536000.0));
    app->add_option("--prefix-cache-interval", args.prefix_cache_interval,
                    "Also checkpoint long prompts every this many tokens, 0-16777216 (default "
                    "1024; 0: only message boundaries and complete prompts)")
        ->check(in_range(0, int64_t{1} << 24));
    app->add_option("--max-sessions", args.max_sessions,
                    "Most sessions kept, 1-1000000 (default 256; the least recently used idle "
                    "one is evicted for a new one)")
        ->check(in_range(1, 1000000));
    app->add_option("--session-memory-mb", args.session_memory_mb,
                    "Memory for all sessions' history, MiB, 1-1048576 (default 256)")
        ->check(in_range(1, int64_t{1} << 20));
    app->add_option("--session-idle-seconds", args.session_idle_seconds,
                    "Drop sessions idle this long, 0-31536000 (default 3600; 0: never)")
        ->check(in_real_range(0.0, 31536000.0));
}

std::vector<serving::config::FlagValue> explicit_flag_values(const CLI::App& app,
                                                             const ServeArgs& args) {
    std::vector<serving::config::FlagValue> values;
    if (app.get_option("model")->count() > 0) {
        values.push_back({"server.model", args.model.model, "MODEL"});
        values.push_back({"server.model_dir", std::string(), "MODEL"});
    }
    for (const serving::config::Setting& setting : serving::config::serve_settings()) {
        if (setting.flag.empty()) continue;
        const CLI::Option* option = app.get_option_no_throw(setting.flag);
        CHERENKOV_ASSERT(option != nullptr, "serve has no flag " + setting.flag);
        if (option->count() == 0) continue;
        const FlagReader* reader = nullptr;
        for (const FlagReader& r : flag_readers()) {
            if (setting.flag == r.flag) reader = &r;
        }
        CHERENKOV_ASSERT(reader != nullptr, "no reader for " + setting.flag);
        values.push_back({setting.key, reader->read(args), setting.flag});
    }
    return values;
}

}  // namespace cherenkov::cli
