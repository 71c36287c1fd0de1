// sequence_state_bytes against SequenceState::bytes() of real states of the tiny_a fixture (GDN,
// QSA with an indexer, PLE and MTP layers): fresh, after a whole context of tokens, and with a
// verification call's row snapshots.
#include "engine/model/sequence_state_size.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/model/fixture_engine.h"
#include "engine/model/prefill_quantum.h"

namespace cherenkov::testing {
namespace {

constexpr const char* kCheckpoint = "tiny_a/hf_flat_fused";

int64_t n_mtp_layers(const FixtureEngine& engine) {
    return engine.weights->mtp ? static_cast<int64_t>(engine.weights->mtp->layers.size()) : 0;
}

std::vector<int32_t> some_tokens(int64_t n, int64_t vocab) {
    std::vector<int32_t> tokens;
    for (int64_t t = 0; t < n; ++t) tokens.push_back(static_cast<int32_t>((7 * t + 3) % vocab));
    return tokens;
}

TEST(SequenceStateBytes, EqualsAFreshStateForEveryContext) {
    FixtureEngine engine(kCheckpoint);
    const auto& config = engine.weights->config;
    ASSERT_TRUE(config.indexer.has_value());
    ASSERT_TRUE(config.has_ple());
    ASSERT_GT(n_mtp_layers(engine), 0);
    for (const int64_t ctx : {int64_t{1}, int64_t{3}, int64_t{64}, int64_t{1000}}) {
        const engine::SequenceState state = engine.model.new_sequence(ctx);
        EXPECT_EQ(engine::sequence_state_bytes(config, ctx, n_mtp_layers(engine)), state.bytes())
            << "context " << ctx;
    }
    // Without the MTP head (--drafts 0) its caches are not counted.
    const engine::SequenceState trunk_only = engine::make_sequence_state(config, 64, 0);
    EXPECT_EQ(engine::sequence_state_bytes(config, 64, 0), trunk_only.bytes());
    EXPECT_LT(engine::sequence_state_bytes(config, 64, 0),
              engine::sequence_state_bytes(config, 64, n_mtp_layers(engine)));
}

TEST(SequenceStateBytes, AFullContextAllocatesNothingMore) {
    FixtureEngine engine(kCheckpoint);
    const int64_t ctx = 40;  // ten indexer blocks of 4
    engine::SequenceState state = engine.model.new_sequence(ctx);
    engine::ForwardOptions options;
    engine::forward_in_chunks(engine.model, state, some_tokens(ctx, engine.model.vocab_size()),
                              options, 16);
    ASSERT_EQ(state.position, ctx);
    EXPECT_EQ(engine::sequence_state_bytes(engine.weights->config, ctx, n_mtp_layers(engine)),
              state.bytes());
}

TEST(SequenceStateBytes, CountsTheSnapshotsOfAVerificationCall) {
    FixtureEngine engine(kCheckpoint);
    const int64_t ctx = 32;
    engine::SequenceState state = engine.model.new_sequence(ctx);
    const std::vector<int32_t> tokens = some_tokens(8, engine.model.vocab_size());
    engine.model.forward(state, std::span(tokens).first(5), engine::ForwardOptions{});
    engine::ForwardOptions verify;
    verify.all_logits = true;
    verify.snapshot_rows = true;
    engine.model.forward(state, std::span(tokens).subspan(5, 3), verify);
    ASSERT_EQ(state.n_snapshot_rows, 3);
    EXPECT_EQ(engine::sequence_state_bytes(engine.weights->config, ctx, n_mtp_layers(engine), 3),
              state.bytes());
}

TEST(SequenceStateBytes, SaturatesInsteadOfWrapping) {
    FixtureEngine engine(kCheckpoint);
    EXPECT_EQ(engine::sequence_state_bytes(engine.weights->config, INT64_MAX, 1), UINT64_MAX);
    const uint64_t big = engine::sequence_state_bytes(engine.weights->config, 100'000'000, 1);
    EXPECT_GT(big, engine::sequence_state_bytes(engine.weights->config, 1'000'000, 1) * 99);
}

}  // namespace
}  // namespace cherenkov::testing
