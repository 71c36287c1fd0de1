// The worker (seed "Serving architecture", "Memory and scheduling"): one thread owns the model
// and runs admitted requests round-robin, yielding after one prefill chunk or one decode step (a
// token with its drafts). Requests are interleaved, not batched. Switching to another request
// parks the running one's sequence state in host memory and restores the next one's; a lone
// request never pays for a switch. Admission reserves each request's state memory for its
// context: requests that cannot fit together wait, one that cannot fit alone gets 503.
//
// The worker owns the prefix cache (prefix_cache.h): a request starts from the longest
// checkpoint of its prompt's beginning, prefills the rest in chunks cut at the positions worth a
// checkpoint (message boundaries, every interval_tokens, the complete prompt), and saves those it
// reaches that the cache lacks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/generate/generator.h"
#include "engine/generate/sequence_switcher.h"
#include "engine/model/prefill_quantum.h"
#include "serving/prefix_cache.h"
#include "serving/request_channel.h"
#include "serving/request_metrics.h"
#include "serving/response_text.h"
#include "serving/session_store.h"

namespace cherenkov::serving {

struct WorkerOptions {
    int max_active = 2;  // requests interleaved at once
    // Sets of backend caches (device memory on CUDA) the running requests share; 0: one per
    // active request (as many as the device has room for). With fewer, switching between
    // requests parks states in host memory.
    int cache_sets = 0;
    int max_queued = 16;  // requests waiting for admission; more get 503
    int64_t max_ctx = 4096;
    // Admitted requests' reservations must fit in this (0: no limit).
    uint64_t state_budget_bytes = 0;
    // The reservation of a request whose context is `tokens` long.
    std::function<uint64_t(int64_t tokens)> state_bytes;
    // The most rows of a prefill chunk: the quantum cut to the backend's rows per call.
    engine::PrefillQuantum prefill_quantum;
    // Prefill pacing: while other requests are active or queued, prefill chunks start at
    // min(128, quantum) rows and adapt to take about this long (0: no adaptation).
    double prefill_chunk_seconds = 0.5;
    PrefixCacheOptions prefix_cache;
    // Called on the worker thread about once a second while no request runs (session expiry;
    // the prefix cache expires its own entries then too).
    std::function<void()> idle_tick;
    // Called on the worker thread about every 250 ms while requests run and about once a second
    // while idle: takes an engine observation (stats_board.h). The worker also refreshes
    // WorkerCounters::running then.
    std::function<void()> observe;
    // Where generations add their prefill chunks (LoadedModel::prefill_counters()); may be null.
    engine::PrefillCounters* prefill_counters = nullptr;
};

// A request ready to run: tokens and options resolved by the HTTP side.
struct Job {
    std::shared_ptr<RequestChannel> channel;
    std::vector<int32_t> prompt;
    engine::GenerationOptions generation;  // generation.max_ctx is the request's context
    std::unique_ptr<ResponseText> text;
    bool stream = false;
    // Prompt positions worth a prefix checkpoint besides the complete prompt and the interval
    // (message boundaries: where later prompts of the conversation diverge), ascending.
    std::vector<int64_t> boundaries;
    // A session turn's pin (held until the job is done; the writer commits it). The final frame
    // of a session turn carries the random stream the turn leaves.
    std::shared_ptr<SessionTurn> turn;
};

// A running request as status shows it (refreshed at each observation).
struct RunningRequest {
    std::string id;
    std::string phase;  // "prefill" or "decode"
    int64_t prompt_tokens = 0;
    int64_t prompt_done = 0;  // prompt tokens processed (restored prefix included)
    int64_t cached_tokens = 0;
    int64_t generated_tokens = 0;
    double queued_seconds = 0.0;
    double running_seconds = 0.0;  // since admission
    bool session = false;          // a session turn
};

// Figures for status and the tests: what the worker is doing.
struct WorkerCounters {
    int active = 0;
    int queued = 0;
    uint64_t reserved_bytes = 0;
    int64_t prefill_chunk_tokens = 0;  // the pacing target
    uint64_t switches = 0;             // times a request's state was parked for another's
    uint64_t completed = 0;
    uint64_t cancelled = 0;
    uint64_t failed = 0;
    uint64_t rejected = 0;
    PrefixCacheCounters prefix_cache;
    std::vector<RunningRequest> running;  // as of the last observation
    std::string current;                  // the request the worker ran last ("" before any)
};

class Worker {
public:
    // Starts the thread. `model` must outlive the worker; only the worker thread uses it.
    Worker(engine::ModelBackend& model, WorkerOptions options);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Queues a job (its channel then hears admit or reject). Throws ApiError 503 when the queue
    // is full or the worker is stopping.
    void submit(std::unique_ptr<Job> job);
    // Wakes the worker (a queued request was cancelled).
    void poke();
    // Cancels every queued and running request and joins the thread. Idempotent.
    void stop();

    WorkerCounters counters() const;
    // Totals over finished, cancelled and rejected requests.
    RequestTotals request_totals() const { return metrics_.totals(); }

private:
    struct Running {
        std::unique_ptr<Job> job;
        std::unique_ptr<engine::Generator> generator;
        engine::ParkedCaches parked;
        uint64_t reserved = 0;
        std::chrono::steady_clock::time_point submitted;
        double queued_seconds = 0.0;
        std::vector<int64_t> saves;  // prompt positions still to checkpoint, ascending
        Timings cache;               // the cache_* figures of its Timings
        uint64_t last_step = 0;      // when it last ran (the worker's step count)
        std::chrono::steady_clock::time_point admitted;
    };

    void run();
    // Gives `state` (r's) a set of backend caches, parking the request that ran least recently
    // when every set is held.
    void hold_caches(Running& r, engine::SequenceState& state);
    // Creates the request's generator on a fresh state, restoring the longest cached prefix of
    // its prompt, and plans the checkpoints it will save.
    void start_generation(Running& r);
    // Saves the running request's state in the prefix cache (it just reached r.saves.front()).
    void save_checkpoint(Running& r);
    // Rows of the next prefill chunk: the paced or full chunk, cut at the next checkpoint.
    int64_t chunk_rows(const Running& r, int64_t paced) const;
    void publish_cache_counters();
    // Calls options_.observe and refreshes counters_.running, at most every `interval`.
    void observe(std::chrono::milliseconds interval);
    // Admits waiting requests in order while they fit; answers cancelled and impossible ones.
    void admit_waiting();
    // Runs one step of `r`; returns false when it has finished (final frame sent).
    bool step(Running& r);
    void finish(Running& r, const std::string& reason, std::optional<ApiError> error = {});
    // Rows of the next prefill chunk: the paced target while others wait, else 0 (the full
    // quantum).
    int64_t prefill_rows();

    engine::ModelBackend& model_;
    WorkerOptions options_;
    engine::SequenceSwitcher switcher_;
    PrefixCache cache_;  // worker thread only

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Running> waiting_;  // guarded by mutex_
    bool stopping_ = false;        // guarded by mutex_
    WorkerCounters counters_;      // guarded by mutex_

    // Worker thread only.
    std::vector<Running> active_;
    size_t next_ = 0;           // round-robin position in active_
    uint64_t steps_ = 0;        // steps run, for least-recently-run parking
    int64_t chunk_target_ = 0;  // paced prefill chunk, rows
    std::chrono::steady_clock::time_point last_observed_{};
    RequestMetrics metrics_;  // its own lock; taken after mutex_ when both are held

    std::thread thread_;
};

}  // namespace cherenkov::serving
