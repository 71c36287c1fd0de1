#include "serving/session_store.h"

#include <cstdio>
#include <variant>

#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

uint64_t history_bytes(const std::vector<text::ChatMessage>& history) {
    uint64_t total = 0;
    for (const text::ChatMessage& m : history) total += message_bytes(m);
    return total;
}

ApiError not_found(const std::string& id) {
    return ApiError(404, "no session has id '" + id + "' (it may have expired or been evicted)",
                    "not_found_error", "session_id", "session_not_found");
}

}  // namespace

SessionUsage& SessionUsage::operator+=(const SessionUsage& other) {
    prompt_tokens += other.prompt_tokens;
    cached_tokens += other.cached_tokens;
    generated_tokens += other.generated_tokens;
    prefill_seconds += other.prefill_seconds;
    decode_seconds += other.decode_seconds;
    return *this;
}

uint64_t message_bytes(const text::ChatMessage& m) {
    // A fixed charge per message and call covers the structs themselves.
    uint64_t bytes = sizeof(text::ChatMessage);
    if (const auto* s = std::get_if<std::string>(&m.content)) bytes += s->size();
    if (const auto* parts = std::get_if<std::vector<text::ContentPart>>(&m.content)) {
        for (const text::ContentPart& p : *parts) bytes += sizeof(p) + p.text.size();
    }
    for (const text::MessageToolCall& call : m.tool_calls) {
        bytes += sizeof(call) + call.id.size() + call.name.size() + call.arguments.dump().size();
    }
    if (m.tool_call_id) bytes += m.tool_call_id->size();
    if (m.name) bytes += m.name->size();
    if (m.reasoning_content) bytes += m.reasoning_content->size();
    return bytes;
}

SessionStore::SessionStore(SessionOptions options) : options_(options) {}

std::string SessionStore::new_id() {
    for (;;) {
        char text[40];
        std::snprintf(text, sizeof text, "session-%016llx%08llx",
                      static_cast<unsigned long long>(id_rng_()),
                      static_cast<unsigned long long>(id_rng_() & 0xffffffffULL));
        if (sessions_.count(text) == 0) return text;
    }
}

SessionInfo SessionStore::create(const engine::SamplingOptions& sampling, int64_t context_tokens,
                                 Clock::time_point now) {
    std::lock_guard lock(mutex_);
    expire_locked(now);
    while (static_cast<int64_t>(sessions_.size()) >= options_.max_sessions) {
        if (!evict_one("")) {
            throw ApiError(503,
                           "session capacity exhausted: all " +
                               std::to_string(options_.max_sessions) +
                               " sessions have a turn in flight (--max-sessions); retry later",
                           "server_error", "", "capacity_exhausted");
        }
    }
    Session s;
    s.info.id = new_id();
    s.info.created = unix_seconds();
    s.info.context_tokens = context_tokens;
    s.info.sampling = sampling;
    s.rng.seed(sampling.seed);
    s.last_used = now;
    SessionInfo info = s.info;
    sessions_.emplace(info.id, std::move(s));
    ++counters_.created;
    return info;
}

std::optional<SessionInfo> SessionStore::find(const std::string& id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    expire_locked(now);
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return std::nullopt;
    return it->second.info;
}

void SessionStore::remove(const std::string& id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    expire_locked(now);
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) throw not_found(id);
    if (it->second.info.busy) {
        throw ApiError(409, "session '" + id + "' has a turn in flight; cancel it first",
                       "invalid_request_error", "session_id", "session_busy");
    }
    erase(it);
    ++counters_.deleted;
}

SessionStore::Session& SessionStore::get(const std::string& id) {
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) throw not_found(id);
    return it->second;
}

TurnBase SessionStore::begin_turn(const std::string& id, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    expire_locked(now);
    Session& s = get(id);
    if (s.info.busy) {
        throw ApiError(409,
                       "session '" + id +
                           "' already has a turn in flight (one at a time); wait for it or "
                           "cancel it",
                       "invalid_request_error", "session_id", "session_busy");
    }
    s.info.busy = true;
    return {s.history, s.info.sampling, s.rng, s.info.context_tokens};
}

void SessionStore::commit_turn(const std::string& id, TurnCommit turn, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(id);
    // A pinned session is never evicted or deleted, so it is still here.
    if (it == sessions_.end()) throw not_found(id);
    Session& s = it->second;
    const uint64_t added = history_bytes(turn.messages);
    // What no eviction can free: this session's history and the sessions with turns in flight.
    uint64_t pinned = 0;
    for (const auto& [other_id, other] : sessions_) {
        if (other.info.busy || other_id == id) pinned += other.info.history_bytes;
    }
    if (pinned + added > options_.max_bytes) {
        s.info.busy = false;
        ++counters_.turns_discarded;
        throw ApiError(503,
                       "session storage is full: the turn's " + std::to_string(added) +
                           " bytes of history do not fit the " +
                           std::to_string(options_.max_bytes) +
                           "-byte limit (--session-memory-mb); the turn was not committed",
                       "server_error", "", "session_memory_exhausted");
    }
    // Room for the new history: other idle sessions go, least recently used first.
    while (bytes_ + added > options_.max_bytes && evict_one(id)) {
    }
    for (text::ChatMessage& m : turn.messages) s.history.push_back(std::move(m));
    s.info.history_bytes += added;
    s.info.messages = static_cast<int64_t>(s.history.size());
    bytes_ += added;
    s.info.sampling = turn.sampling;
    s.rng = turn.rng;
    s.info.usage += turn.usage;
    ++s.info.turns;
    s.info.busy = false;
    s.last_used = now;
    ++counters_.turns_committed;
}

void SessionStore::discard_turn(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    it->second.info.busy = false;
    ++counters_.turns_discarded;
}

void SessionStore::expire(Clock::time_point now) {
    std::lock_guard lock(mutex_);
    expire_locked(now);
}

void SessionStore::expire_locked(Clock::time_point now) {
    if (options_.idle_seconds <= 0) return;
    const auto limit = std::chrono::duration<double>(options_.idle_seconds);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        const auto next = std::next(it);
        if (!it->second.info.busy && now - it->second.last_used > limit) {
            erase(it);
            ++counters_.expired;
        }
        it = next;
    }
}

bool SessionStore::evict_one(const std::string& keep) {
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
        if (it->second.info.busy || it->first == keep) continue;
        if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) {
            oldest = it;
        }
    }
    if (oldest == sessions_.end()) return false;
    erase(oldest);
    ++counters_.evicted;
    return true;
}

void SessionStore::erase(std::map<std::string, Session>::iterator it) {
    bytes_ -= it->second.info.history_bytes;
    sessions_.erase(it);
}

SessionCounters SessionStore::counters() const {
    std::lock_guard lock(mutex_);
    SessionCounters c = counters_;
    c.sessions = sessions_.size();
    c.bytes = bytes_;
    for (const auto& [id, s] : sessions_) {
        if (s.info.busy) ++c.busy;
    }
    return c;
}

void SessionTurn::commit(TurnCommit turn) {
    if (!open_) return;
    open_ = false;
    store_.commit_turn(id_, std::move(turn), SessionStore::Clock::now());
}

void SessionTurn::discard() {
    if (!open_) return;
    open_ = false;
    store_.discard_turn(id_);
}

}  // namespace cherenkov::serving
