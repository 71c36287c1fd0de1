// `cherenkov serve MODEL [--host H] [--port P] [--max-ctx N] [engine flags]`: the
// OpenAI-compatible HTTP server (docs/serving.md). It listens first (GET /health says
// "loading"), loads the model, prints one line with its URL on stdout when ready, and serves
// until SIGINT or SIGTERM, which cancel the requests in flight, finish their responses and exit 0.
#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "engine/generate/context_budget.h"
#include "engine/model/sequence_state_size.h"
#include "serving/control/control_client.h"
#include "serving/control/control_server.h"
#include "serving/control/monitoring_handlers.h"
#include "serving/http_server.h"
#include "text/chat_template.h"

namespace cherenkov::cli {
namespace {

struct ServeOptions {
    ModelOptions model;
    std::string host = "127.0.0.1";
    int port = 8080;
    int64_t max_ctx = 4096;
    int drafts = 2;
    bool no_eos = false;
    int max_active = 2;
    int max_queued = 16;
    double prefill_chunk_seconds = 0.5;
    std::string state_memory_gb = "auto";
    // Retention (docs/serving.md "Prefix cache", "Sessions"); the TOML config fills the same
    // structs.
    serving::PrefixCacheOptions prefix_cache;
    serving::SessionOptions sessions;
    std::string socket;  // the control socket; empty: default_control_socket_path()
};

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

// Blocks SIGINT and SIGTERM in every thread (call before starting any), so one thread takes
// them with sigwait.
sigset_t block_stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    // A client that closes its socket must not kill the server with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    return set;
}

int serve(const ServeOptions& options) {
    if (options.max_active < 1 || options.max_queued < 0) {
        throw_invalid("--max-active must be at least 1 and --max-queued at least 0");
    }
    const uint64_t budget = state_budget(options.state_memory_gb);
    ModelOptions model_options = options.model;
    model_options.max_rows = 1 + options.drafts;
    model_options.drafts = options.drafts;  // 0: no MTP head is loaded
    model_options.max_ctx = options.max_ctx;
    if (model_options.check) throw_invalid("serve does not take --check (a CLI diagnostic)");
    engine::validate_prefill_quantum(model_options.prefill_quantum);

    const sigset_t signals = block_stop_signals();
    std::mutex mutex;
    std::condition_variable stop_requested;
    bool stop = false;
    bool loaded = false;
    std::thread watcher([&] {
        int received = 0;
        sigwait(&signals, &received);
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
    serving::HttpServer server(http);
    server.start();
    // The control socket answers from startup (status says ready: false while loading). Declared
    // after `server`, so it stops answering before the server goes.
    const std::string url = "http://" + options.host + ":" + std::to_string(server.port()) + "/v1";
    serving::control::ControlHandlers control_handlers;
    const std::string socket_path =
        options.socket.empty() ? serving::control::default_control_socket_path() : options.socket;
    serving::control::add_monitoring_handlers(
        control_handlers, server,
        {.model = options.model.model, .url = url, .socket_path = socket_path});
    serving::control::ControlServer control(socket_path, std::move(control_handlers));
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
    served.stop_at_eos = !options.no_eos;
    served.prefill_quantum = loaded_model.prefill_quantum();

    serving::WorkerOptions worker;
    worker.max_active = options.max_active;
    worker.max_queued = options.max_queued;
    worker.max_ctx = options.max_ctx;
    worker.prefill_quantum = loaded_model.prefill_chunk_tokens();
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

// Flags that fill the prefix cache's and the sessions' limits. Sizes are MiB (the seed's
// --prefix-cache-mb); memory flags are stored in bytes.
void add_retention_options(CLI::App* app, ServeOptions& options) {
    auto mib = [](uint64_t& bytes) {
        return [&bytes](const std::string& text) {
            bytes = static_cast<uint64_t>(std::stoull(text)) << 20;
        };
    };
    app->add_option_function<std::string>("--prefix-cache-mb", mib(options.prefix_cache.max_bytes),
                                          "Host memory for prefix checkpoints, MiB, 0-1048576 "
                                          "(default 512; 0 turns the prefix cache off)")
        ->check(in_range(0, int64_t{1} << 20));
    app->add_option("--prefix-cache-entries", options.prefix_cache.max_entries,
                    "Most prefix checkpoints kept, 1-100000 (default 64)")
        ->check(in_range(1, 100000));
    app->add_option("--prefix-cache-idle-seconds", options.prefix_cache.idle_seconds,
                    "Drop prefix checkpoints unused this long, 0-31536000 (default 1800; 0: never)")
        ->check(in_real_range(0.0, 31536000.0));
    app->add_option("--prefix-cache-interval", options.prefix_cache.interval_tokens,
                    "Also checkpoint long prompts every this many tokens, 0-16777216 (default "
                    "1024; 0: only message boundaries and complete prompts)")
        ->check(in_range(0, int64_t{1} << 24));
    app->add_option("--max-sessions", options.sessions.max_sessions,
                    "Most sessions kept, 1-1000000 (default 256; the least recently used idle "
                    "one is evicted for a new one)")
        ->check(in_range(1, 1000000));
    app->add_option_function<std::string>("--session-memory-mb", mib(options.sessions.max_bytes),
                                          "Memory for all sessions' history, MiB, 1-1048576 "
                                          "(default 256)")
        ->check(in_range(1, int64_t{1} << 20));
    app->add_option("--session-idle-seconds", options.sessions.idle_seconds,
                    "Drop sessions idle this long, 0-31536000 (default 3600; 0: never)")
        ->check(in_real_range(0.0, 31536000.0));
}

}  // namespace

Command register_serve(CLI::App& parent) {
    auto options = std::make_shared<ServeOptions>();
    CLI::App* app = parent.add_subcommand(
        "serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serving.md)");
    add_model_options(app, options->model);
    app->add_option("--host", options->host, "Address to listen on (default 127.0.0.1)");
    app->add_option("--port", options->port, "Port to listen on, 0-65535 (default 8080; 0: any)")
        ->check(CLI::Range(0, 65535));
    app->add_option("--max-ctx", options->max_ctx,
                    "Most tokens of prompt, output and draft headroom per request (default 4096)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
    app->add_option("--drafts", options->drafts,
                    "MTP drafts per step: 0, 1 or 2 (default 2, adaptive; greedy requests only)")
        ->check(CLI::IsMember({0, 1, 2}));
    app->add_flag("--no-eos", options->no_eos,
                  "Do not stop requests at EOS (for benchmarks: every request runs to max_tokens)");
    app->add_option("--max-active", options->max_active,
                    "Requests interleaved at once, 1-64 (default 2)")
        ->check(CLI::Range(1, 64));
    app->add_option("--max-queued", options->max_queued,
                    "Requests waiting for admission before 503, 0-4096 (default 16)")
        ->check(CLI::Range(0, 4096));
    app->add_option("--prefill-chunk-seconds", options->prefill_chunk_seconds,
                    "While other requests wait, aim prefill chunks at this many seconds, 0-60 "
                    "(default 0.5; 0: fixed chunks of min(128, quantum))")
        ->check(CLI::Range(0.0, 60.0));
    app->add_option("--state-memory-gb", options->state_memory_gb,
                    "Sequence-state memory admission may reserve, decimal GB, or auto (default: "
                    "a quarter of the memory available at startup)");
    add_retention_options(app, *options);
    app->add_option("--socket", options->socket,
                    "Control socket for status, stats and dash (default "
                    "$TMPDIR/cherenkov-UID/control.sock; docs/monitoring.md)");
    return {app, [options]() { return serve(*options); }};
}

}  // namespace cherenkov::cli
