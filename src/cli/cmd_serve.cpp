// `cherenkov serve [MODEL] [--config FILE] [--print-config] [--host H] [--port P] [--max-ctx N]
// [engine flags]`: the OpenAI-compatible HTTP server (docs/serving.md). Its settings are the
// built-in defaults, then the configuration file, then the flags given (docs/configuration.md).
// It listens first (GET /health says "loading"), loads the model, prints one line with its URL
// on stdout when ready, and serves until SIGINT or SIGTERM, which cancel the requests in flight,
// finish their responses and exit 0. SIGHUP reloads the configuration's [defaults].
#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "cli/serve_flags.h"
#include "engine/generate/context_budget.h"
#include "engine/model/sequence_state_size.h"
#include "serving/config/config_holder.h"
#include "serving/config/settings_report.h"
#include "serving/control/control_client.h"
#include "serving/control/control_server.h"
#include "serving/control/monitoring_handlers.h"
#include "serving/http_server.h"
#include "store/index/storage_paths.h"
#include "text/chat_template.h"

namespace cherenkov::cli {
namespace {

struct ServeOptions {
    ModelOptions model;
    std::string host = "127.0.0.1";
    int port = 8080;
    int64_t max_ctx = 4096;
    int drafts = 2;
    int max_active = 2;
    int max_queued = 16;
    double prefill_chunk_seconds = 0.5;
    std::string state_memory_gb = "auto";
    // Retention (docs/serving.md "Prefix cache", "Sessions"); the TOML config fills the same
    // structs.
    serving::PrefixCacheOptions prefix_cache;
    serving::SessionOptions sessions;
    std::string socket;  // the control socket; empty: default_control_socket_path()
    size_t max_body_bytes = serving::HttpOptions{}.max_body_bytes;
    std::chrono::seconds write_timeout = serving::HttpOptions{}.write_timeout;
};

// The options serve() runs with, from the resolved settings (docs/configuration.md), in the
// units the server's structs take. `args` adds what is no setting (--check, --repack).
ServeOptions options_from(const serving::config::ServeConfig& c, const ServeArgs& args) {
    ServeOptions o;
    o.model = args.model;
    o.model.model = !c.server.model_dir.empty() ? c.server.model_dir : c.server.model;
    // Neither key nor MODEL: the pinned default checkpoint, as `prepare` selects it.
    if (o.model.model.empty()) o.model.model = store::default_model_reference();
    o.model.root = c.server.root;
    o.model.backend = c.server.backend;
    o.model.threads = static_cast<int>(c.server.threads);
    o.model.cpu_activations = c.server.cpu_activations;
    o.model.prefill_quantum = c.limits.prefill_quantum;
    o.model.experts = static_cast<int>(c.experts.resident_bits);
    o.model.miss_experts = static_cast<int>(c.experts.miss_bits);
    o.model.pool = c.experts.pool_gb;
    o.model.host_pool = c.experts.host_pool_gb;
    o.model.cpu_experts = c.experts.cpu_experts;
    o.model.cache_policy = c.experts.cache_policy;
    o.model.cut_weak = static_cast<float>(c.experts.cut_weak);
    o.model.io_threads = static_cast<int>(c.experts.io_threads);
    o.model.buffered_io = c.experts.buffered_io;
    o.model.build_missing_store = c.experts.build_missing_store;
    o.host = c.server.host;
    o.port = static_cast<int>(c.server.port);
    o.max_ctx = c.server.max_ctx;
    o.drafts = static_cast<int>(c.experts.drafts);
    o.max_active = static_cast<int>(c.limits.max_active);
    o.max_queued = static_cast<int>(c.limits.max_queued);
    o.prefill_chunk_seconds = c.limits.prefill_chunk_seconds;
    o.state_memory_gb = c.limits.state_memory_gb;
    o.prefix_cache.max_bytes = static_cast<uint64_t>(c.prefix_cache.max_mb) << 20;
    o.prefix_cache.max_entries = c.prefix_cache.max_entries;
    o.prefix_cache.idle_seconds = c.prefix_cache.idle_seconds;
    o.prefix_cache.interval_tokens = c.prefix_cache.interval_tokens;
    o.sessions.max_sessions = c.sessions.max_sessions;
    o.sessions.max_bytes = static_cast<uint64_t>(c.sessions.memory_mb) << 20;
    o.sessions.idle_seconds = c.sessions.idle_seconds;
    o.socket = c.server.socket;
    o.max_body_bytes = static_cast<size_t>(c.limits.max_body_mb) << 20;
    o.write_timeout = std::chrono::seconds(c.limits.write_timeout_seconds);
    return o;
}

// What admission reserves per request besides its sequence state (seed "Memory and
// scheduling": checkpoint, sampling, token and text storage): the sampler's rows of logits (the
// chosen row, its penalized copy, a log-probability row) and the text the context's tokens
// decode to with their ids and offsets (measured: under 16 bytes a token for Python and prose).
constexpr uint64_t kSamplerRows = 3;
constexpr uint64_t kTextBytesPerToken = 16;

// The state memory admission may reserve: --state-memory-gb, or by default a quarter of the
// memory available at startup (the rest is the expert pool's and the system's).
uint64_t state_budget(const std::string& flag) {
    if (flag == "auto") return engine::available_memory_bytes() / 4;
    double gb = 0;
    try {
        size_t used = 0;
        gb = std::stod(flag, &used);
        if (used != flag.size()) throw std::invalid_argument(flag);
    } catch (const std::exception&) {
        throw_invalid("--state-memory-gb must be a number of decimal GB or auto, got '" + flag +
                      "'");
    }
    if (!(gb > 0) || gb > 1e6) throw_invalid("--state-memory-gb must be in (0, 1e6]");
    return static_cast<uint64_t>(gb * 1e9);
}

// Blocks SIGINT, SIGTERM and SIGHUP in every thread (call before starting any), so one thread
// takes them with sigwait.
sigset_t block_stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    // A client that closes its socket must not kill the server with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    return set;
}

// One line on stderr with a reload's outcome (SIGHUP has no one else to tell).
void log_reload(const nlohmann::json& result) {
    if (result.value("ok", false)) {
        std::string changed;
        for (const auto& key : result["changed"]) {
            changed += (changed.empty() ? "" : ", ") + key.get<std::string>();
        }
        std::fprintf(stderr, "cherenkov: configuration reloaded: generation %llu, %s\n",
                     static_cast<unsigned long long>(result.value("generation", uint64_t{0})),
                     changed.empty() ? "nothing changed" : ("changed " + changed).c_str());
    } else {
        std::fprintf(stderr, "cherenkov: configuration reload refused: %s\n",
                     result.value("error", std::string()).c_str());
    }
}

int serve(const ServeOptions& options, std::shared_ptr<serving::config::ConfigHolder> settings) {
    if (options.max_active < 1 || options.max_queued < 0) {
        throw_invalid("--max-active must be at least 1 and --max-queued at least 0");
    }
    const uint64_t budget = state_budget(options.state_memory_gb);
    ModelOptions model_options = options.model;
    model_options.max_rows = 1 + options.drafts;
    model_options.drafts = options.drafts;  // 0: no MTP head is loaded
    model_options.max_ctx = options.max_ctx;
    if (model_options.check) throw_invalid("serve does not take --check (a CLI diagnostic)");

    const sigset_t signals = block_stop_signals();
    std::mutex mutex;
    std::condition_variable stop_requested;
    bool stop = false;
    bool loaded = false;
    std::thread watcher([&, settings] {
        int received = 0;
        for (;;) {
            sigwait(&signals, &received);
            if (received != SIGHUP) break;
            log_reload(settings->reload());
        }
        std::lock_guard lock(mutex);
        if (!loaded) {
            // Nothing to finish yet: loading cannot be interrupted part-way.
            std::fprintf(stderr, "cherenkov: interrupted while loading\n");
            std::_Exit(0);
        }
        stop = true;
        stop_requested.notify_all();
    });
    watcher.detach();

    serving::HttpOptions http;
    http.host = options.host;
    http.port = options.port;
    http.max_ctx = options.max_ctx;
    http.sessions = options.sessions;
    http.max_body_bytes = options.max_body_bytes;
    http.write_timeout = options.write_timeout;
    serving::HttpServer server(http);
    // The control socket answers from startup (status says ready: false while loading). Declared
    // after `server`, so it stops answering before the server goes; claimed before the server
    // starts, so a second server on the same socket fails before it listens on anything.
    serving::control::ControlHandlers control_handlers;
    const std::string socket_path =
        options.socket.empty() ? serving::control::default_control_socket_path() : options.socket;
    serving::control::add_monitoring_handlers(
        control_handlers, server,
        {.model = options.model.model, .host = options.host, .socket_path = socket_path});
    control_handlers.config_show = [settings] { return settings->show(); };
    control_handlers.config_reload = [settings] { return settings->reload(); };
    serving::control::ControlServer control(socket_path, std::move(control_handlers));
    server.start();
    std::fprintf(stderr, "cherenkov: loading %s (http://%s:%d/health answers once it is ready)\n",
                 options.model.model.c_str(), options.host.c_str(), server.port());

    OpenedModel opened = load_model(model_options);
    engine::LoadedModel& loaded_model = *opened.loaded;
    serving::ServedModel served(loaded_model.model(),
                                text::Tokenizer::load_directory(opened.store_dir()));
    try {
        served.chat_template = text::ChatTemplate::load_directory(opened.store_dir());
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::NotFound) throw;
        std::fprintf(stderr, "cherenkov: %s; chat completions are refused\n", e.what());
    }
    for (int64_t id : loaded_model.weights().config.eos_token_ids)
        served.eos_ids.push_back(static_cast<int32_t>(id));
    if (auto eos = served.tokenizer.eos_token_id()) served.eos_ids.push_back(*eos);
    served.names = {"cherenkov"};
    for (const std::string& name : {opened.resolved.alias, opened.resolved.model_id}) {
        if (!name.empty() && name != "cherenkov") served.names.push_back(name);
    }
    served.drafts = options.drafts;
    // Each request copies the configuration's current [defaults] when it arrives.
    served.current_defaults = [settings] { return settings->defaults(); };
    served.prefill_quantum = loaded_model.prefill_quantum();

    serving::WorkerOptions worker;
    worker.max_active = options.max_active;
    worker.max_queued = options.max_queued;
    worker.max_ctx = options.max_ctx;
    // The quantum cut to what the backend takes per call (at most the quantum, at least 1).
    worker.prefill_quantum = engine::PrefillQuantum::of(loaded_model.prefill_chunk_tokens());
    worker.prefill_chunk_seconds = options.prefill_chunk_seconds;
    worker.state_budget_bytes = budget;
    worker.prefix_cache = options.prefix_cache;
    const model_data::qwen4_exp::Config config = loaded_model.weights().config;
    const int64_t mtp_layers = served.model->has_mtp() ? config.mtp_num_hidden_layers : 0;
    const uint64_t sampler_bytes =
        kSamplerRows * static_cast<uint64_t>(config.vocab_size) * sizeof(float);
    worker.state_bytes = [config, mtp_layers, sampler_bytes](int64_t tokens) {
        return engine::sequence_state_bytes(config, tokens, mtp_layers) + sampler_bytes +
               static_cast<uint64_t>(tokens) * kTextBytesPerToken;
    };
    // Observations are taken on the engine thread (the worker) and read by the control socket
    // and /metrics; the first one is published before requests are served.
    worker.prefill_counters = &loaded_model.prefill_counters();
    worker.observe = [&loaded_model, &server] {
        server.stats_board().publish(loaded_model.observe(nullptr));
    };
    server.stats_board().publish(loaded_model.observe(nullptr));
    server.set_ready(std::move(served), std::move(worker));

    std::printf("cherenkov: serving %s at http://%s:%d/v1\n", options.model.model.c_str(),
                options.host.c_str(), server.port());
    std::fflush(stdout);
    std::fprintf(stderr, "backend: %s; expert pool: %s\n", loaded_model.backend_name().c_str(),
                 loaded_model.pool_description().c_str());

    std::unique_lock lock(mutex);
    loaded = true;
    stop_requested.wait(lock, [&] { return stop; });
    lock.unlock();
    std::fprintf(stderr, "cherenkov: stopping: cancelling requests in flight\n");
    server.stop();
    return 0;
}

// Resolves the settings (defaults < configuration file < explicit flags) and serves them, or
// prints them for --print-config.
int run_serve(const CLI::App& app, const ServeArgs& args) {
    std::vector<serving::config::FlagValue> flags = explicit_flag_values(app, args);
    std::optional<serving::config::ConfigFile> file;
    if (!args.config.empty()) {
        file = serving::config::read_config_file(args.config);
    } else {
        // The default file counts only when it exists (`cherenkov paths` names it).
        const std::string path =
            store::resolve_storage_paths(args.model.root, store::PathEnvironment::from_process())
                .config;
        std::error_code ec;
        if (std::filesystem::exists(path, ec)) file = serving::config::read_config_file(path);
    }
    serving::config::ResolvedConfig resolved =
        serving::config::resolve_config(file ? &*file : nullptr, flags);
    if (args.print_config) {
        std::printf(
            "# cherenkov serve: resolved settings (configuration file: %s)\n"
            "# after each value: where it came from (default, file or flag) and its "
            "flag\n\n%s",
            resolved.file.empty() ? "none" : resolved.file.c_str(),
            serving::config::settings_toml(serving::config::settings_json(resolved, 1)).c_str());
        return 0;
    }
    const ServeOptions options = options_from(resolved.values, args);
    return serve(options, std::make_shared<serving::config::ConfigHolder>(std::move(resolved),
                                                                          std::move(flags)));
}

}  // namespace

Command register_serve(CLI::App& parent) {
    auto args = std::make_shared<ServeArgs>();
    CLI::App* app = parent.add_subcommand(
        "serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serving.md)");
    add_serve_flags(app, *args);
    return {app, [args, app]() { return run_serve(*app, *args); }};
}

}  // namespace cherenkov::cli
