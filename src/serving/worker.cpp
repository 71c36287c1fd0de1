#include "serving/worker.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/log.h"
#include "engine/generate/context_budget.h"
#include "engine/generate/state_checkpoint.h"

namespace cherenkov::serving {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// The API's finish reason for the generator's stop reason.
std::string finish_reason(const std::string& stop_reason, bool has_calls) {
    if (stop_reason == "length" || stop_reason == "context") return "length";
    // eos, or "stopped": a stop string matched. Both are natural ends.
    return has_calls ? "tool_calls" : "stop";
}

}  // namespace

Worker::Worker(engine::ModelBackend& model, WorkerOptions options)
    : model_(model),
      options_(std::move(options)),
      // A set of device caches per running request while the device has room, so interleaving
      // costs no copies; past that, switching parks states in host memory.
      switcher_(model_, options_.max_ctx,
                options_.cache_sets > 0 ? options_.cache_sets : options_.max_active),
      cache_(options_.prefix_cache),
      chunk_target_(std::min<int64_t>(128, options_.prefill_quantum.rows())) {
    counters_.prefill_chunk_tokens = chunk_target_;
    thread_ = std::thread([this] { run(); });
}

Worker::~Worker() {
    stop();
}

void Worker::submit(std::unique_ptr<Job> job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) throw ApiError(503, "the server is shutting down", "server_error");
        // Room for max_active running requests and max_queued waiting ones.
        const int held = counters_.active + static_cast<int>(waiting_.size());
        if (held >= options_.max_active + options_.max_queued) {
            ++counters_.rejected;
            metrics_.record_rejected();
            throw ApiError(503,
                           "request capacity exhausted: " + std::to_string(counters_.active) +
                               " requests are running and " + std::to_string(waiting_.size()) +
                               " waiting; retry later",
                           "server_error", "", "capacity_exhausted");
        }
        Running r;
        r.job = std::move(job);
        r.submitted = std::chrono::steady_clock::now();
        waiting_.push_back(std::move(r));
    }
    wake_.notify_all();
}

void Worker::poke() {
    wake_.notify_all();
}

void Worker::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

WorkerCounters Worker::counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
}

void Worker::admit_waiting() {
    std::vector<std::pair<Running, std::optional<ApiError>>> answered;
    {
        std::lock_guard lock(mutex_);
        while (!waiting_.empty()) {
            Running& r = waiting_.front();
            if (stopping_ || r.job->channel->cancelled()) {
                metrics_.record(
                    {.outcome = RequestOutcome::Cancelled, .prompt_tokens = r.job->prompt.size()});
                answered.emplace_back(std::move(r),
                                      ApiError(499, "the request was cancelled before admission",
                                               "cancelled", "", "cancelled"));
                waiting_.pop_front();
                ++counters_.cancelled;
                continue;
            }
            const uint64_t need =
                options_.state_bytes ? options_.state_bytes(r.job->generation.max_ctx) : 0;
            if (options_.state_budget_bytes > 0 && need > options_.state_budget_bytes) {
                answered.emplace_back(
                    std::move(r),
                    ApiError(503,
                             "the request's context of " +
                                 std::to_string(r.job->generation.max_ctx) + " tokens needs " +
                                 engine::byte_size_text(need) +
                                 " of sequence state, more than the server's budget of " +
                                 engine::byte_size_text(options_.state_budget_bytes) +
                                 " (--state-memory-gb); ask for fewer max_tokens",
                             "server_error", "", "insufficient_memory"));
                waiting_.pop_front();
                ++counters_.rejected;
                metrics_.record_rejected();
                continue;
            }
            const bool room = static_cast<int>(active_.size()) < options_.max_active &&
                              (options_.state_budget_bytes == 0 ||
                               counters_.reserved_bytes + need <= options_.state_budget_bytes);
            // In order: a request that must wait holds back the ones behind it.
            if (!room) break;
            r.reserved = need;
            counters_.reserved_bytes += need;
            r.admitted = std::chrono::steady_clock::now();
            r.queued_seconds = seconds_between(r.submitted, r.admitted);
            active_.push_back(std::move(r));
            waiting_.pop_front();
            active_.back().job->channel->admit();
        }
        counters_.active = static_cast<int>(active_.size());
        counters_.queued = static_cast<int>(waiting_.size());
    }
    for (auto& [r, error] : answered) {
        r.job->turn.reset();  // as in finish(): the session is free when the client hears
        r.job->channel->reject(std::move(*error));
    }
}

int64_t Worker::prefill_rows() {
    bool others = active_.size() > 1;
    if (!others) {
        std::lock_guard lock(mutex_);
        others = !waiting_.empty();
    }
    return others ? chunk_target_ : 0;
}

void Worker::finish(Running& r, const std::string& reason, std::optional<ApiError> error) {
    Frame frame;
    frame.final = true;
    if (!error) {
        r.job->text->finish();
        frame.delta = r.job->text->take();
    }
    frame.error = std::move(error);
    frame.content = r.job->text->content();
    frame.stop_sequence = r.job->text->stop_sequence();
    frame.calls = r.job->text->calls();
    frame.logprobs = r.job->text->logprobs();
    for (const std::string& line : r.job->text->diagnostics()) {
        log_warn("serve", "request " + r.job->channel->id() + ": tool calls: " + line);
    }
    if (frame.error) {
        frame.finish_reason.clear();
    } else if (reason == "cancelled") {
        frame.finish_reason = "cancelled";
    } else {
        frame.finish_reason = finish_reason(reason, !frame.calls.empty());
    }
    frame.usage.prompt_tokens = static_cast<int64_t>(r.job->prompt.size());
    frame.timings = r.cache;
    frame.timings.queued_seconds = r.queued_seconds;
    if (r.generator) {
        const engine::GenerationStats& s = r.generator->stats();
        frame.usage.completion_tokens = s.generated_tokens;
        frame.usage.cached_tokens = s.cached_tokens;
        if (r.job->turn) frame.rng = r.generator->sampler().rng();
        frame.timings.prefill_seconds =
            s.prefill_seconds + r.cache.cache_restore_seconds + r.cache.cache_save_seconds;
        frame.timings.decode_seconds = s.decode_seconds;
        frame.timings.prefill_chunks = s.prefill_chunks;
        frame.timings.decode_steps = s.decode_steps;
        frame.timings.drafts_proposed = s.drafts_proposed[0] + s.drafts_proposed[1];
        frame.timings.drafts_accepted = s.drafts_accepted[0] + s.drafts_accepted[1];
        switcher_.release(r.generator->state());
    }
    // The writer alone settles a session turn: the worker's share of the pin goes before the
    // client can see the end, so a retry right after a cancelled turn finds the session free.
    r.job->turn.reset();
    {
        // Counted out before the client hears the end, so its next request finds the room.
        std::lock_guard lock(mutex_);
        counters_.reserved_bytes -= r.reserved;
        --counters_.active;
        if (frame.error) {
            ++counters_.failed;
        } else if (reason == "cancelled") {
            ++counters_.cancelled;
        } else {
            ++counters_.completed;
        }
    }
    metrics_.record({.outcome = outcome_of(frame.finish_reason, frame.error.has_value()),
                     .prompt_tokens = static_cast<uint64_t>(frame.usage.prompt_tokens),
                     .cached_tokens = static_cast<uint64_t>(frame.usage.cached_tokens),
                     .generated_tokens = static_cast<uint64_t>(frame.usage.completion_tokens),
                     .queued_seconds = frame.timings.queued_seconds,
                     .prefill_seconds = frame.timings.prefill_seconds,
                     .decode_seconds = frame.timings.decode_seconds});
    r.job->channel->push(std::move(frame));
}

void Worker::observe(std::chrono::milliseconds interval) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_observed_ < interval) return;
    last_observed_ = now;
    std::vector<RunningRequest> running;
    running.reserve(active_.size());
    for (const Running& r : active_) {
        RunningRequest entry;
        entry.id = r.job->channel->id();
        entry.prompt_tokens = static_cast<int64_t>(r.job->prompt.size());
        entry.queued_seconds = r.queued_seconds;
        entry.running_seconds = seconds_between(r.admitted, now);
        entry.session = r.job->turn != nullptr;
        entry.phase = "prefill";
        if (r.generator) {
            const engine::GenerationStats& s = r.generator->stats();
            entry.prompt_done = r.generator->prompt_done();
            entry.cached_tokens = s.cached_tokens;
            entry.generated_tokens = s.generated_tokens;
            if (r.generator->prompt_remaining() == 0) entry.phase = "decode";
        }
        running.push_back(std::move(entry));
    }
    {
        std::lock_guard lock(mutex_);
        counters_.running = std::move(running);
    }
    // Outside the lock: an observation reads the engine's counters (and, on CUDA, the device).
    if (options_.observe) options_.observe();
}

bool Worker::step(Running& r) {
    Job& job = *r.job;
    if (job.channel->cancelled()) {
        finish(r, "cancelled");
        return false;
    }
    try {
        r.last_step = ++steps_;
        if (!r.generator) start_generation(r);
        hold_caches(r, r.generator->state());

        const bool prefill = r.generator->prompt_remaining() > 0;
        const int64_t paced = prefill ? prefill_rows() : 0;
        const int64_t rows = prefill ? chunk_rows(r, paced) : 0;
        const int64_t remaining = r.generator->prompt_remaining();
        const auto started = std::chrono::steady_clock::now();
        const bool more = r.generator->step(
            [&](const engine::EmittedToken& token) { return job.text->push(token); }, rows);
        const double seconds = seconds_between(started, std::chrono::steady_clock::now());
        if (prefill && !r.saves.empty() && r.generator->prompt_done() == r.saves.front()) {
            save_checkpoint(r);
        }
        // Pacing: a full paced chunk (not a short tail, nor one cut at a checkpoint) tells how
        // many rows fit the target.
        if (prefill && paced > 0 && rows == paced && remaining > rows &&
            options_.prefill_chunk_seconds > 0 && seconds > 0) {
            const double scaled =
                static_cast<double>(rows) * options_.prefill_chunk_seconds / seconds;
            chunk_target_ = std::clamp<int64_t>(static_cast<int64_t>(std::llround(scaled)), 1,
                                                options_.prefill_quantum.rows());
            std::lock_guard lock(mutex_);
            counters_.prefill_chunk_tokens = chunk_target_;
        }
        if (!more) {
            finish(r, r.generator->stats().stop_reason);
            return false;
        }
        if (job.stream) {
            Frame frame;
            frame.delta = job.text->take();
            if (!frame.delta.empty() && !job.channel->push(std::move(frame))) {
                log_warn("serve", "request " + job.channel->id() +
                                      ": the client fell 16 frames behind; cancelled");
                job.channel->cancel();
            }
        }
        return true;
    } catch (const Error& e) {
        log_error("serve", "request " + job.channel->id() + " failed: " + e.what());
        const int status = e.kind() == ErrorKind::InvalidInput ? 400 : 500;
        finish(
            r, "",
            ApiError(status, e.what(), status == 400 ? "invalid_request_error" : "server_error"));
        return false;
    }
}

void Worker::hold_caches(Running& r, engine::SequenceState& state) {
    while (!switcher_.try_activate(state, r.parked)) {
        Running* oldest = nullptr;
        for (Running& other : active_) {
            if (&other == &r || !other.generator || !other.generator->state().backend) continue;
            if (oldest == nullptr || other.last_step < oldest->last_step) oldest = &other;
        }
        CHERENKOV_ASSERT(oldest != nullptr, "every set of caches is held, but by no request");
        switcher_.park(oldest->generator->state(), oldest->parked);
        std::lock_guard lock(mutex_);
        ++counters_.switches;
    }
}

void Worker::start_generation(Running& r) {
    Job& job = *r.job;
    job.generation.keep_prompt_logits = cache_.enabled();
    job.generation.prefill_counters = options_.prefill_counters;
    r.generator = std::make_unique<engine::Generator>(model_, job.generation);
    std::optional<engine::SequenceState> state = switcher_.new_state(job.generation.max_ctx);
    hold_caches(r, *state);
    try {
        const auto started = std::chrono::steady_clock::now();
        const PrefixCache::Entry* hit =
            cache_.lookup(job.prompt, engine::speculation_enabled(model_, job.generation), started);
        std::span<const float> logits;
        if (hit != nullptr) {
            engine::restore_checkpoint(hit->checkpoint, *state);
            if (hit->checkpoint.tokens().size() == job.prompt.size()) logits = hit->logits;
            r.cache.cache_restore_seconds =
                seconds_between(started, std::chrono::steady_clock::now());
        }
        publish_cache_counters();
        r.generator->start(job.prompt, std::move(state), logits);
    } catch (...) {
        // The caches are the switcher's whatever failed: a state start() did not take gives
        // them back.
        if (state) switcher_.release(*state);
        throw;
    }

    // Where this request saves checkpoints: its message boundaries, every interval, and the
    // complete prompt, past what it restored.
    r.saves.clear();
    if (!cache_.enabled()) return;
    const auto n = static_cast<int64_t>(job.prompt.size());
    const int64_t done = r.generator->prompt_done();
    std::vector<int64_t> at = job.boundaries;
    const int64_t interval = cache_.options().interval_tokens;
    for (int64_t p = interval; interval > 0 && p < n; p += interval) at.push_back(p);
    at.push_back(n);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (const int64_t p : at) {
        if (p > done && p <= n) r.saves.push_back(p);
    }
}

int64_t Worker::chunk_rows(const Running& r, int64_t paced) const {
    if (r.saves.empty()) return paced;
    const int64_t to_checkpoint = r.saves.front() - r.generator->prompt_done();
    return paced > 0 ? std::min(paced, to_checkpoint) : to_checkpoint;
}

void Worker::save_checkpoint(Running& r) {
    r.saves.erase(r.saves.begin());
    const engine::SequenceState& state = r.generator->state();
    const auto started = std::chrono::steady_clock::now();
    const bool complete_prompt = state.position == static_cast<int64_t>(r.job->prompt.size());
    const bool mtp_complete = engine::mtp_state_complete(state, model_.config());
    if (cache_.covers(state.tokens, complete_prompt, mtp_complete, started)) {
        publish_cache_counters();
        return;
    }
    engine::StateCheckpoint checkpoint = engine::save_checkpoint(state);
    std::vector<float> logits;
    if (complete_prompt) {
        const std::span<const float> last = r.generator->prompt_logits();
        logits.assign(last.begin(), last.end());
    }
    const uint64_t bytes = checkpoint.bytes() + logits.capacity() * sizeof(float);
    if (cache_.fits(bytes)) {
        ++r.cache.cache_checkpoints_saved;
        r.cache.cache_checkpoint_bytes += bytes;
    }
    cache_.insert(std::move(checkpoint), std::move(logits), mtp_complete, started);
    r.cache.cache_save_seconds += seconds_between(started, std::chrono::steady_clock::now());
    publish_cache_counters();
}

void Worker::publish_cache_counters() {
    const PrefixCacheCounters c = cache_.counters();
    std::lock_guard lock(mutex_);
    counters_.prefix_cache = c;
}

void Worker::run() {
    for (;;) {
        admit_waiting();
        {
            std::unique_lock lock(mutex_);
            if (stopping_) break;
            if (active_.empty()) {
                // Idle: expiry runs about once a second (seed "Memory and scheduling").
                const bool woken = wake_.wait_for(lock, std::chrono::seconds(1),
                                                  [&] { return stopping_ || !waiting_.empty(); });
                if (!woken) {
                    lock.unlock();
                    cache_.expire(std::chrono::steady_clock::now());
                    publish_cache_counters();
                    if (options_.idle_tick) options_.idle_tick();
                    observe(std::chrono::milliseconds(900));
                }
                continue;
            }
        }
        if (next_ >= active_.size()) next_ = 0;
        {
            std::lock_guard lock(mutex_);
            // Compared first: the id is assigned (and allocated) only when the request changes.
            const std::string& id = active_[next_].job->channel->id();
            if (counters_.current != id) counters_.current = id;
        }
        if (step(active_[next_])) {
            ++next_;
        } else {
            active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(next_));
        }
        observe(std::chrono::milliseconds(250));
    }
    // Stopping: running requests end as cancelled; waiting ones were answered by admit_waiting.
    for (Running& r : active_) finish(r, "cancelled");
    active_.clear();
    admit_waiting();
}

}  // namespace cherenkov::serving
