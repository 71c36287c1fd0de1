// One request's link between the HTTP thread that answers it and the worker that runs it (seed
// "Cancellation and commit", "Memory and scheduling"): the admission outcome, a bounded queue of
// output frames, and the cancel flag. Cancellation can be set from any thread without entering
// the worker; the worker acts on it between steps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "serving/api_error.h"
#include "serving/response_text.h"

namespace cherenkov::serving {

struct Usage {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;
};

// Per-request timing for the response's `timings` (seed "Requests, sessions, and memory":
// prefill covers prompt processing, decode covers verification and text; switches and network
// writes are outside both).
struct Timings {
    double queued_seconds = 0.0;  // submission to admission
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    int64_t prefill_chunks = 0;
    int64_t decode_steps = 0;
    int64_t drafts_proposed = 0;
    int64_t drafts_accepted = 0;
    // Prefix cache work, both inside prefill_seconds (seed: prefill time includes checkpoint
    // creation): restoring the checkpoint the request started from, and saving its own.
    double cache_restore_seconds = 0.0;
    double cache_save_seconds = 0.0;
    int64_t cache_checkpoints_saved = 0;
    uint64_t cache_checkpoint_bytes = 0;  // host RAM of the checkpoints saved
};

// What the worker sends: output so far (streams only), then one final frame.
struct Frame {
    OutputDelta delta;
    bool final = false;
    // Final frames:
    std::string finish_reason;  // stop, length, tool_calls, cancelled; empty with an error
    std::string stop_sequence;  // the stop string that ended the text (finish_reason stop)
    std::optional<ApiError> error;
    std::string content;
    std::vector<text::ToolCall> calls;
    std::vector<LogprobEntry> logprobs;
    Usage usage;
    Timings timings;
    // A session turn's random stream after it (what a successful turn commits).
    std::optional<std::mt19937_64> rng;
};

enum class Admission { Waiting, Admitted, Rejected };

class RequestChannel {
public:
    // The most frames the worker may queue ahead of the writer (seed: a 16-frame queue; a full
    // queue cancels the request).
    static constexpr size_t kQueueFrames = 16;

    explicit RequestChannel(std::string id) : id_(std::move(id)) {}

    const std::string& id() const { return id_; }

    // Any thread. cancel() returns false, changing nothing, once the writer has published the
    // request's final response (seed "Cancellation and commit": cancellation cannot undo a turn
    // that final publication committed).
    bool cancel();
    bool cancelled() const;
    // The writer, right before the final response: atomically chooses completion (true; later
    // cancels are refused) or cancellation (false: a cancel came first).
    bool publish();
    // Called by cancel() (the worker's wake-up, so a waiting request is answered promptly).
    void set_on_cancel(std::function<void()> on_cancel);

    // HTTP side: blocks until the worker admits or rejects the request; the ApiError of a
    // rejection (503 capacity, 499 cancelled before admission, or a failure).
    Admission wait_admission(std::optional<ApiError>* rejection);
    // The next frame, waiting up to `timeout` (nullopt when none came).
    std::optional<Frame> next_frame(std::chrono::milliseconds timeout);

    // Worker side.
    void admit();
    void reject(ApiError error);
    // Queues a frame. A final frame always fits (it replaces nothing: the queue allows one past
    // its bound for it); false when a delta found the queue full.
    bool push(Frame frame);

private:
    std::string id_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    bool cancelled_ = false;
    bool published_ = false;
    std::function<void()> on_cancel_;
    Admission admission_ = Admission::Waiting;
    std::optional<ApiError> rejection_;
    std::deque<Frame> frames_;
};

}  // namespace cherenkov::serving
