// Host checkpoints of sequence states on the CPU backend (engine/generate/state_checkpoint.h):
// restoring one and decoding equals decoding without the round trip, bit for bit, for every
// fixture form with MTP drafts on, from prefixes that end inside and at the edge of a QSA block
// (the indexer's compress ratio) and a PLE window ((Kp-1)·N), from the whole prompt (an exact hit
// choosing its first token from stored logits), and before every decode step. Also: the MTP
// completeness check, and what start() refuses. tests/engine/cuda/state_checkpoint_cuda_test.cpp
// runs the same checks on CUDA.
#include "engine/generate/state_checkpoint.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/generate/checkpoint_checks.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

std::string reference_of(const std::string& checkpoint) {
    return checkpoint.substr(0, checkpoint.find('/')) + "/reference";
}

// Prefix lengths around the QSA block (compress ratio r) and PLE window (w) edges of `config`.
std::vector<int64_t> edge_splits(const model_data::qwen4_exp::Config& c, int64_t n) {
    std::vector<int64_t> splits = {1, n - 1, n};
    const int64_t r = c.indexer ? c.indexer->compress_ratio : 4;
    const int64_t w = c.has_ple() ? c.ple_conv_state_len : 8;
    for (const int64_t edge : {r, 2 * r, w, 2 * w}) {
        for (const int64_t k : {edge - 1, edge, edge + 1}) splits.push_back(k);
    }
    return splits;
}

class CheckpointForms : public ::testing::TestWithParam<const char*> {};

TEST_P(CheckpointForms, RestoreThenDecodeEqualsUninterruptedDecodeBitForBit) {
    const std::string checkpoint = GetParam();
    FixtureEngine engine(checkpoint);
    // Only tiny_a carries MTP tensors (tests/fixtures/README.md); drafts are on wherever a head is.
    if (checkpoint == "tiny_a/hf_flat_fused") {
        ASSERT_TRUE(engine.model.has_mtp());
    }
    ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    const auto& config = engine.weights->config;
    check_checkpoints_are_exact(
        engine.model, prompt, edge_splits(config, static_cast<int64_t>(prompt.size())), checkpoint);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CheckpointForms,
                         ::testing::Values("tiny_a/hf_flat_fused",
                                           "tiny_b/hf_nested_experts_sharded",
                                           "tiny_c/hf_nested_fused", "tiny_c/mlx_q4"),
                         [](const auto& param_info) {
                             std::string name = param_info.param;
                             for (char& ch : name) {
                                 if (ch == '/') ch = '_';
                             }
                             return name;
                         });

TEST(StateCheckpoint, HoldsOnlyValidRowsAndReportsItsBytes) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    engine::SequenceState state = engine.model.new_sequence(256);
    engine::ForwardOptions keep;
    keep.keep_residuals = true;
    engine.model.forward(state, prompt, keep);
    const engine::StateCheckpoint c = engine::save_checkpoint(state);
    EXPECT_EQ(c.position(), static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(c.tokens(), prompt);
    EXPECT_TRUE(c.device.empty());  // the CPU keeps every cache in the host fields
    // Reserved for 256 tokens, the state is larger than the checkpoint of 33.
    EXPECT_LT(c.bytes(), state.bytes());
    for (const engine::LayerState& l : c.host.layers) {
        EXPECT_EQ(l.attention.keys.size(),
                  static_cast<size_t>(l.attention.length * l.attention.kv_width));
        EXPECT_EQ(l.attention.keys.capacity(), l.attention.keys.size());
    }
    // Restored into a state of another model shape: refused.
    FixtureEngine other("tiny_b/hf_nested_experts_sharded");
    engine::SequenceState wrong = other.model.new_sequence(256);
    EXPECT_THROW(engine::restore_checkpoint(c, wrong), cherenkov::Error);
}

TEST(StateCheckpoint, MtpStateIsCompleteOnlyWithEveryPendingResidual) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    const auto& config = engine.weights->config;
    engine::SequenceState fresh = engine.model.new_sequence(256);
    EXPECT_TRUE(engine::mtp_state_complete(fresh, config));

    // Prefilled by a request that did not speculate: no residuals.
    engine::SequenceState plain = engine.model.new_sequence(256);
    engine.model.forward(plain, prompt, {});
    EXPECT_FALSE(engine::mtp_state_complete(plain, config));

    engine::SequenceState kept = engine.model.new_sequence(256);
    engine::ForwardOptions keep;
    keep.keep_residuals = true;
    engine.model.forward(kept, prompt, keep);
    EXPECT_TRUE(engine::mtp_state_complete(kept, config));
    // Caught up to the end, the head's last row used a token the state has not processed (the
    // following-token dependency): not a state to continue from.
    engine::SequenceState caught_up = kept;
    engine.model.mtp_catch_up(caught_up, prompt.back(), false);
    EXPECT_EQ(caught_up.mtp_length, caught_up.position);
    EXPECT_FALSE(engine::mtp_state_complete(caught_up, config));

    // A speculating generation refuses a start state without the residuals; one that does not
    // speculate takes it.
    engine::GenerationOptions options = checkpoint_options(4, 256);
    const std::vector<float> logits(static_cast<size_t>(engine.model.vocab_size()), 0.0F);
    engine::Generator speculating(engine.model, options);
    EXPECT_THROW(speculating.start(prompt, engine::SequenceState(plain), logits), cherenkov::Error);
    options.drafts = 0;
    engine::Generator greedy(engine.model, options);
    EXPECT_NO_THROW(greedy.start(prompt, engine::SequenceState(plain), logits));
}

TEST(StateCheckpoint, StartRefusesAStateThatIsNotAPrefixOfThePrompt) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    engine::SequenceState state = engine.model.new_sequence(256);
    engine::ForwardOptions keep;
    keep.keep_residuals = true;
    engine.model.forward(state, std::span(prompt).first(10), keep);
    engine::GenerationOptions options = checkpoint_options(4, 256);
    engine::Generator g(engine.model, options);
    std::vector<int32_t> other = prompt;
    other[3] = other[3] == 1 ? 2 : 1;
    EXPECT_THROW(g.start(other, engine::SequenceState(state)), cherenkov::Error);
    // The whole prompt without its last row's logits cannot choose a first token.
    EXPECT_THROW(g.start(std::span(prompt).first(10), engine::SequenceState(state)),
                 cherenkov::Error);
    EXPECT_NO_THROW(g.start(prompt, engine::SequenceState(state)));
    EXPECT_EQ(g.prompt_done(), 10);
    EXPECT_EQ(g.stats().cached_tokens, 10);
}

// A session's turn continues the committed random stream: the stream a sampled generation leaves
// gives the next generation what one uninterrupted stream would, and greedy draws nothing.
TEST(StateCheckpoint, SamplersContinueAGivenRandomStream) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    engine::GenerationOptions options;
    options.max_tokens = 6;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    options.sampling.temperature = 0.9F;
    options.sampling.seed = 7;
    engine::Generator a(engine.model, options);
    std::vector<int32_t> first;
    a.generate(prompt, [&](int32_t t) {
        first.push_back(t);
        return true;
    });
    const std::mt19937_64 after = a.sampler().rng();
    std::mt19937_64 expected(7);
    expected.discard(6);  // one draw per sampled token
    EXPECT_EQ(after, expected);

    options.rng = after;
    engine::Generator b(engine.model, options);
    b.generate(prompt, [](int32_t) { return true; });
    expected.discard(6);
    EXPECT_EQ(b.sampler().rng(), expected);

    options.sampling.temperature = 0.0F;
    engine::Generator greedy(engine.model, options);
    greedy.generate(prompt, [](int32_t) { return true; });
    EXPECT_EQ(greedy.sampler().rng(), after);
}

}  // namespace
}  // namespace cherenkov::testing
