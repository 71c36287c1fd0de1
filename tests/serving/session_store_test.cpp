// The session store: one turn at a time (409), 404 for unknown sessions, commits that add the
// turn's messages, settings, stream and usage together, discarded turns that change nothing,
// and retention: eviction of idle sessions by count and bytes (never a busy one), idle expiry.
#include "serving/session_store.h"

#include <gtest/gtest.h>

#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

using Clock = SessionStore::Clock;

int status_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e.status();
    }
    return 200;
}

text::ChatMessage message(text::Role role, const std::string& content) {
    text::ChatMessage m;
    m.role = role;
    m.content = content;
    return m;
}

TurnCommit turn_of(const std::string& user, const std::string& reply) {
    TurnCommit t;
    t.messages = {message(text::Role::User, user), message(text::Role::Assistant, reply)};
    t.usage.prompt_tokens = 10;
    t.usage.generated_tokens = 3;
    return t;
}

TEST(SessionStore, TurnsCommitTogetherOrNotAtAll) {
    SessionStore store(SessionOptions{});
    const Clock::time_point now = Clock::now();
    engine::SamplingOptions settings;
    settings.temperature = 0.7F;
    settings.seed = 42;
    const SessionInfo info = store.create(settings, 2048, now);
    EXPECT_EQ(info.id.rfind("session-", 0), 0U);
    EXPECT_EQ(info.context_tokens, 2048);

    TurnBase base = store.begin_turn(info.id, now);
    EXPECT_TRUE(base.history.empty());
    EXPECT_EQ(base.rng, std::mt19937_64(42));
    EXPECT_FLOAT_EQ(base.sampling.temperature, 0.7F);
    // One turn at a time; a busy session cannot be deleted.
    EXPECT_EQ(status_of([&] { store.begin_turn(info.id, now); }), 409);
    EXPECT_EQ(status_of([&] { store.remove(info.id, now); }), 409);
    EXPECT_TRUE(store.find(info.id, now)->busy);

    TurnCommit first = turn_of("hello", "hi there");
    first.sampling = settings;
    first.sampling.top_k = 20;
    first.rng = std::mt19937_64(7);
    store.commit_turn(info.id, first, now);
    SessionInfo after = *store.find(info.id, now);
    EXPECT_FALSE(after.busy);
    EXPECT_EQ(after.turns, 1);
    EXPECT_EQ(after.messages, 2);
    EXPECT_EQ(after.sampling.top_k, 20);
    EXPECT_EQ(after.usage.prompt_tokens, 10);
    EXPECT_EQ(after.usage.generated_tokens, 3);
    EXPECT_EQ(after.history_bytes,
              message_bytes(first.messages[0]) + message_bytes(first.messages[1]));

    // A discarded turn leaves everything as committed.
    base = store.begin_turn(info.id, now);
    EXPECT_EQ(base.history.size(), 2U);
    EXPECT_EQ(base.rng, std::mt19937_64(7));
    store.discard_turn(info.id);
    const SessionInfo unchanged = *store.find(info.id, now);
    EXPECT_EQ(unchanged.turns, 1);
    EXPECT_EQ(unchanged.history_bytes, after.history_bytes);
    EXPECT_FALSE(unchanged.busy);

    // A SessionTurn discards unless committed.
    { SessionTurn turn(store, info.id, store.begin_turn(info.id, now)); }
    EXPECT_FALSE(store.find(info.id, now)->busy);
    EXPECT_EQ(store.counters().turns_discarded, 2U);

    store.remove(info.id, now);
    EXPECT_FALSE(store.find(info.id, now));
    EXPECT_EQ(status_of([&] { store.begin_turn(info.id, now); }), 404);
    EXPECT_EQ(status_of([&] { store.remove(info.id, now); }), 404);
}

TEST(SessionStore, EvictsIdleSessionsByCountNeverBusyOnes) {
    SessionOptions options;
    options.max_sessions = 2;
    SessionStore store(options);
    const Clock::time_point now = Clock::now();
    const SessionInfo a = store.create({}, 64, now);
    const SessionInfo b = store.create({}, 64, now + std::chrono::seconds(1));
    store.begin_turn(a.id, now);  // a is older but busy
    const SessionInfo c = store.create({}, 64, now + std::chrono::seconds(2));
    EXPECT_TRUE(store.find(a.id, now));
    EXPECT_FALSE(store.find(b.id, now));
    EXPECT_TRUE(store.find(c.id, now));
    store.begin_turn(c.id, now);
    // Both remaining sessions are busy: no room for a third.
    EXPECT_EQ(status_of([&] { store.create({}, 64, now); }), 503);
    EXPECT_EQ(store.counters().evicted, 1U);
    EXPECT_EQ(store.counters().busy, 2U);
}

TEST(SessionStore, EvictsIdleSessionsForHistoryBytes) {
    const TurnCommit turn = turn_of(std::string(1000, 'u'), std::string(1000, 'a'));
    const uint64_t turn_bytes = message_bytes(turn.messages[0]) + message_bytes(turn.messages[1]);
    SessionOptions options;
    options.max_bytes = 2 * turn_bytes + turn_bytes / 2;
    SessionStore store(options);
    const Clock::time_point now = Clock::now();
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
        ids.push_back(store.create({}, 64, now).id);
        store.begin_turn(ids.back(), now);
        store.commit_turn(ids.back(), turn, now + std::chrono::seconds(i));
    }
    // The third commit evicted the least recently used session.
    EXPECT_FALSE(store.find(ids[0], now));
    EXPECT_TRUE(store.find(ids[1], now));
    EXPECT_EQ(store.counters().bytes, 2 * turn_bytes);
    // A turn whose history cannot fit even alone is refused, and the session stays as it was.
    TurnCommit huge = turn_of(std::string(3 * turn_bytes, 'u'), "x");
    store.begin_turn(ids[2], now);
    EXPECT_EQ(status_of([&] { store.commit_turn(ids[2], huge, now); }), 503);
    const SessionInfo kept = *store.find(ids[2], now);
    EXPECT_EQ(kept.turns, 1);
    EXPECT_FALSE(kept.busy);
    // Nothing was evicted for it.
    EXPECT_TRUE(store.find(ids[1], now));
}

TEST(SessionStore, IdleSessionsExpireUnlessATurnPinsThem) {
    SessionOptions options;
    options.idle_seconds = 10;
    SessionStore store(options);
    const Clock::time_point t0 = Clock::now();
    const SessionInfo idle = store.create({}, 64, t0);
    const SessionInfo pinned = store.create({}, 64, t0);
    store.begin_turn(pinned.id, t0);
    store.expire(t0 + std::chrono::seconds(11));
    EXPECT_FALSE(store.find(idle.id, t0 + std::chrono::seconds(11)));
    EXPECT_TRUE(store.find(pinned.id, t0 + std::chrono::seconds(11)));
    // A successful turn refreshes retention.
    store.commit_turn(pinned.id, turn_of("q", "a"), t0 + std::chrono::seconds(12));
    EXPECT_TRUE(store.find(pinned.id, t0 + std::chrono::seconds(20)));
    EXPECT_FALSE(store.find(pinned.id, t0 + std::chrono::seconds(23)));
    EXPECT_EQ(store.counters().expired, 2U);
}

}  // namespace
}  // namespace cherenkov::serving
