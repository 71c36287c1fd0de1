// Sessions (seed "Sessions", "Cancellation and commit", "Retention"): server-side conversations.
// A session holds its committed history (messages, tool calls as structured calls), the
// effective sampling settings and random stream of its last successful turn, its context limit
// and cumulative usage. A turn pins its session (one turn at a time; 409 otherwise), runs from
// copies of the committed state, and either commits the new messages, settings, stream and usage
// together or leaves the session exactly as it was. Sessions live in RAM under byte, count and
// idle limits, idle ones evicted least recently used; none survives the server.
//
// Every method may be called from any thread (HTTP threads, the worker's idle tick); one mutex
// guards the store, and no method does anything slow while holding it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/generate/sampler.h"
#include "text/chat_message.h"

namespace cherenkov::serving {

struct SessionOptions {
    int64_t max_sessions = 256;                // --max-sessions
    uint64_t max_bytes = uint64_t{256} << 20;  // --session-memory-mb: all sessions' history
    double idle_seconds = 3600.0;              // --session-idle-seconds; 0: never expire
};

// Cumulative over committed turns (seed "Requests, sessions, and memory").
struct SessionUsage {
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;
    int64_t generated_tokens = 0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;

    SessionUsage& operator+=(const SessionUsage& other);
};

// What GET /v1/sessions/{id} shows.
struct SessionInfo {
    std::string id;
    int64_t created = 0;  // Unix seconds
    int64_t turns = 0;    // committed turns
    uint64_t history_bytes = 0;
    int64_t messages = 0;
    int64_t context_tokens = 0;
    engine::SamplingOptions sampling;  // the committed settings
    SessionUsage usage;
    bool busy = false;  // a turn is in flight
};

// What a turn starts from: copies of the committed state, so the turn runs without the store.
struct TurnBase {
    std::vector<text::ChatMessage> history;
    engine::SamplingOptions sampling;
    std::mt19937_64 rng;
    int64_t context_tokens = 0;
};

// What a successful turn commits, all together.
struct TurnCommit {
    std::vector<text::ChatMessage> messages;  // the turn's new messages, then the reply
    engine::SamplingOptions sampling;         // the turn's effective settings
    std::mt19937_64 rng;                      // the stream as the turn left it
    SessionUsage usage;
};

// Figures for the statistics (cumulative since start, except sessions, busy and bytes).
struct SessionCounters {
    uint64_t sessions = 0;
    uint64_t busy = 0;
    uint64_t bytes = 0;  // history
    uint64_t created = 0;
    uint64_t deleted = 0;
    uint64_t evicted = 0;  // to make room (count or bytes)
    uint64_t expired = 0;  // idle past the limit
    uint64_t turns_committed = 0;
    uint64_t turns_discarded = 0;  // cancelled or failed
};

// Bytes a message takes in a session's history (its text, names, ids and call arguments).
uint64_t message_bytes(const text::ChatMessage& message);

class SessionStore {
public:
    using Clock = std::chrono::steady_clock;

    explicit SessionStore(SessionOptions options);

    const SessionOptions& options() const { return options_; }

    // A new session with these committed settings (its stream seeded from sampling.seed).
    // Evicts the least recently used idle session when the count is at its limit; throws
    // ApiError 503 when every session is busy.
    SessionInfo create(const engine::SamplingOptions& sampling, int64_t context_tokens,
                       Clock::time_point now);

    std::optional<SessionInfo> find(const std::string& id, Clock::time_point now);

    // Throws ApiError 404 for an unknown session, 409 while a turn is in flight.
    void remove(const std::string& id, Clock::time_point now);

    // Pins the session for a turn and returns its committed state. Throws ApiError 404 for an
    // unknown session, 409 when a turn is in flight.
    TurnBase begin_turn(const std::string& id, Clock::time_point now);
    // Commits a successful turn and unpins the session. Evicts least recently used idle
    // sessions when the new history does not fit the byte limit; throws ApiError 503 (the turn
    // not committed, the session unpinned) when it cannot fit even so.
    void commit_turn(const std::string& id, TurnCommit turn, Clock::time_point now);
    // Unpins the session without committing (cancelled or failed turn).
    void discard_turn(const std::string& id);

    // Drops idle sessions past the idle limit (in-flight turns pin theirs).
    void expire(Clock::time_point now);

    SessionCounters counters() const;

private:
    struct Session {
        SessionInfo info;
        std::vector<text::ChatMessage> history;
        std::mt19937_64 rng;
        Clock::time_point last_used;
    };

    Session& get(const std::string& id);  // throws ApiError 404; mutex_ held
    void expire_locked(Clock::time_point now);
    // Evicts the least recently used idle session other than `keep`; false when there is none.
    bool evict_one(const std::string& keep);
    void erase(std::map<std::string, Session>::iterator it);
    std::string new_id();

    SessionOptions options_;
    mutable std::mutex mutex_;                 // guards everything below
    std::map<std::string, Session> sessions_;  // by id
    uint64_t bytes_ = 0;
    SessionCounters counters_;
    std::mt19937_64 id_rng_{std::random_device{}()};
};

// One turn's pin on its session: created by begin_turn, it commits or discards the turn once,
// and discards it when dropped otherwise. The writer and the worker share it, so the session
// stays pinned while either still has the turn (queued, running or publishing).
class SessionTurn {
public:
    SessionTurn(SessionStore& store, std::string id, TurnBase base)
        : store_(store), id_(std::move(id)), base_(std::move(base)) {}
    ~SessionTurn() { discard(); }
    SessionTurn(const SessionTurn&) = delete;
    SessionTurn& operator=(const SessionTurn&) = delete;

    const std::string& id() const { return id_; }
    const TurnBase& base() const { return base_; }

    // The writer's, once: commits (throws ApiError 503 as commit_turn does) or discards.
    void commit(TurnCommit turn);
    void discard();

    // What the turn adds besides the reply, and its effective settings (set when the job is
    // built).
    std::vector<text::ChatMessage> new_messages;
    engine::SamplingOptions sampling;

private:
    SessionStore& store_;
    std::string id_;
    TurnBase base_;
    bool open_ = true;
};

}  // namespace cherenkov::serving
