// The HTTP front of `cherenkov serve` (seed "HTTP server"; docs/serving.md): OpenAI's completion
// endpoints with JSON and server-sent events, the model list, health, and request cancellation.
// It listens before the model is loaded (health says "loading"), so a client can wait for it.
// Every error is OpenAI's JSON error object; nothing a client sends stops it serving others.
// Sessions (session_store.h) are kept here, on the HTTP side: a turn renders the session's
// history with its new messages, and its writer commits the turn right before the final
// response.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "serving/served_model.h"
#include "serving/session_store.h"
#include "serving/stats_board.h"
#include "serving/worker.h"

namespace cherenkov::serving {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port (port() tells which)
    // Largest request body; larger ones get 413.
    size_t max_body_bytes = size_t{8} << 20;
    // Seconds a response write may block before the client counts as gone.
    std::chrono::seconds write_timeout{30};
    // Most tokens of prompt, output and draft headroom one request may take.
    int64_t max_ctx = 4096;
    SessionOptions sessions;
};

class HttpServer {
public:
    explicit HttpServer(HttpOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts serving in background threads; throws Io naming the address when it
    // cannot bind.
    void start();
    int port() const;

    // The model is loaded: completion requests are served from now on, by a worker started
    // with `worker` options.
    void set_ready(ServedModel model, WorkerOptions worker);

    // Ends the server: running and queued requests end as cancelled, their responses are
    // finished, then the listener stops. Idempotent.
    void stop();

    // The worker's figures (zeros before set_ready), prefix cache included.
    WorkerCounters counters() const;
    // The session store's figures.
    SessionCounters session_counters() const;
    // Totals over finished requests (zeros before set_ready).
    RequestTotals request_totals() const;
    // Whether the model is loaded and requests are served.
    bool ready() const;
    // The latest engine observation, which GET /metrics and the control socket read; the engine
    // thread publishes to it (WorkerOptions::observe).
    StatsBoard& stats_board();

    // Requests registered (queued, running or still writing their response).
    size_t registered_requests() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cherenkov::serving
