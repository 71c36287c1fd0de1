// Incremental evaluation equals the full pass (docs/qwen4_exp.md §5.1): prefill then one token
// at a time, uneven chunks, token by token; the reference's greedy continuation; and rollback of
// verified rows (§5.2) equal to a run that only ever saw the accepted tokens.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/generate/sampler.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

const char* const kCheckpoints[] = {"tiny_a/hf_flat_fused", "tiny_b/hf_nested_experts_sharded",
                                    "tiny_c/hf_nested_fused"};

std::string reference_of(const std::string& checkpoint) {
    return checkpoint.substr(0, checkpoint.find('/')) + "/reference";
}

// Logits of every position, computed in the given chunk sizes (cycled).
std::vector<float> chunked_logits(FixtureEngine& engine, const std::vector<int32_t>& tokens,
                                  const std::vector<size_t>& chunks) {
    engine::SequenceState state = engine.model.new_sequence(256);
    std::vector<float> logits;
    size_t at = 0;
    for (size_t i = 0; at < tokens.size(); ++i) {
        const size_t n = std::min(chunks[i % chunks.size()], tokens.size() - at);
        engine::ForwardOptions options;
        options.all_logits = true;
        auto result = engine.model.forward(state, std::span(tokens).subspan(at, n), options);
        logits.insert(logits.end(), result.logits.begin(), result.logits.end());
        at += n;
    }
    return logits;
}

TEST(Incremental, EveryScheduleEqualsTheFullPass) {
    for (const char* checkpoint : kCheckpoints) {
        FixtureEngine engine(checkpoint);
        ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
        for (const char* prompt : {"chat", "len33", "eos_mid", "eos_first"}) {
            const auto tokens = reference.tokens(std::string("input_ids.") + prompt);
            const std::vector<float> full = chunked_logits(engine, tokens, {tokens.size()});
            const std::vector<std::vector<size_t>> schedules = {{tokens.size() / 3,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1,
                                                                 1},
                                                                {3, 1, 4, 1, 5, 9, 2, 6},
                                                                {1}};
            for (const auto& schedule : schedules) {
                const std::vector<float> ours = chunked_logits(engine, tokens, schedule);
                EXPECT_LE(max_abs_diff(ours, full), 1e-4F) << checkpoint << " " << prompt;
            }
        }
    }
}

TEST(Incremental, GreedyContinuationMatchesTheReference) {
    for (const char* checkpoint : kCheckpoints) {
        FixtureEngine engine(checkpoint);
        ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
        const auto prompt = reference.tokens("input_ids.len33");
        const auto ids = reference.tokens("greedy.len33.ids");
        const auto expected = reference.read<float>("greedy.len33.logits");
        const int64_t vocab = engine.model.vocab_size();
        engine::SequenceState state = engine.model.new_sequence(256);
        auto result = engine.model.forward(state, prompt, {});
        int32_t next = engine::argmax(result.logits);
        for (size_t i = 0; i < ids.size(); ++i) {
            ASSERT_EQ(next, ids[i]) << checkpoint << " step " << i;
            const int32_t token[1] = {next};
            result = engine.model.forward(state, token, {});
            std::vector<float> ref(expected.begin() + static_cast<int64_t>(i) * vocab,
                                   expected.begin() + static_cast<int64_t>(i + 1) * vocab);
            EXPECT_LE(max_abs_diff(result.logits, ref), 1e-3F) << checkpoint << " step " << i;
            next = engine::argmax(result.logits);
        }
    }
}

// Verify [x, d1, d2] with forced drafts, commit a+1 rows, continue: equals never having seen
// the rejected rows.
TEST(Incremental, CommitRollsBackRejectedRows) {
    for (const char* checkpoint : kCheckpoints) {
        FixtureEngine engine(checkpoint);
        ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
        const auto tokens = reference.tokens("input_ids.chat");
        const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + 20);
        const std::vector<int32_t> continuation(tokens.begin() + 20, tokens.begin() + 40);
        for (int64_t accepted = 0; accepted <= 2; ++accepted) {
            engine::SequenceState verified = engine.model.new_sequence(256);
            engine::SequenceState plain = engine.model.new_sequence(256);
            engine.model.forward(verified, prefix, {});
            engine.model.forward(plain, prefix, {});
            // Rows: x, then drafts; rows after `accepted` drafts are wrong tokens.
            std::vector<int32_t> rows = {continuation[0], continuation[1], continuation[2]};
            for (int64_t j = accepted + 1; j < 3; ++j)
                rows[static_cast<size_t>(j)] = (rows[static_cast<size_t>(j)] + 7) % 300;
            engine::ForwardOptions verify;
            verify.all_logits = true;
            verify.snapshot_rows = true;
            engine.model.forward(verified, rows, verify);
            engine.model.commit(verified, accepted + 1);
            engine.model.forward(
                plain, std::span(continuation).first(static_cast<size_t>(accepted + 1)), {});
            ASSERT_EQ(verified.position, plain.position);
            ASSERT_EQ(verified.tokens, plain.tokens);
            // Continue both with the same tokens.
            const auto rest = std::span(continuation).subspan(static_cast<size_t>(accepted + 1), 8);
            engine::ForwardOptions all;
            all.all_logits = true;
            auto a = engine.model.forward(verified, rest, all);
            auto b = engine.model.forward(plain, rest, all);
            EXPECT_LE(max_abs_diff(a.logits, b.logits), 1e-5F)
                << checkpoint << " accepted " << accepted;
        }
    }
}

// A copied SequenceState is a checkpoint (§5.3): restoring it and running the suffix equals
// running the whole prompt, and the original sequence is untouched by the copy's progress.
TEST(Incremental, CheckpointRestoreEqualsTheFullPrompt) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto tokens = reference.tokens("input_ids.chat");
    const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + 50);
    const std::vector<int32_t> suffix(tokens.begin() + 50, tokens.end());
    engine::SequenceState state = engine.model.new_sequence(256);
    engine::ForwardOptions keep;
    keep.keep_residuals = true;
    engine.model.forward(state, prefix, keep);
    const engine::SequenceState checkpoint = state;
    engine::ForwardOptions all;
    all.all_logits = true;
    auto first = engine.model.forward(state, suffix, all);
    engine::SequenceState restored = checkpoint;
    auto second = engine.model.forward(restored, suffix, all);
    EXPECT_EQ(first.logits, second.logits);
    const std::vector<float> full = chunked_logits(engine, tokens, {tokens.size()});
    const std::vector<float> tail(full.end() - static_cast<int64_t>(first.logits.size()),
                                  full.end());
    EXPECT_LE(max_abs_diff(second.logits, tail), 1e-4F);
    // The MTP state travels with the checkpoint.
    EXPECT_EQ(checkpoint.pending_residuals.size(),
              prefix.size() * static_cast<size_t>(engine.model.config().hc_width()));
}

TEST(Incremental, RejectsTokensOutsideTheVocabularyBeforeWork) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    engine::SequenceState state = engine.model.new_sequence(16);
    const std::vector<int32_t> bad = {1, 2, 512};
    EXPECT_THROW(engine.model.forward(state, bad, {}), cherenkov::Error);
    EXPECT_EQ(state.position, 0);
    const std::vector<int32_t> negative = {-1};
    EXPECT_THROW(engine.model.forward(state, negative, {}), cherenkov::Error);
}

}  // namespace
}  // namespace cherenkov::testing
