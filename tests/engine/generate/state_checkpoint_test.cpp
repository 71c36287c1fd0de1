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
#include "engine/model/fixture_forms.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::testing {
namespace {

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

INSTANTIATE_TEST_SUITE_P(Fixtures, CheckpointForms, CHERENKOV_FIXTURE_FORMS, fixture_form_name);

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

// What a checkpoint of the Flash shape (docs/qwen4_exp.md §1.2, FN) holds after a prefill of n
// tokens with MTP drafts on: the fixed recurrent, convolution and PLE states, and per token the
// K/V, index and block keys of the 12 QSA layers, the pending MTP residual (C·H floats) and the
// token id. The state is sized as a prefill leaves it (no weights are needed for the sizes); the
// figures are the checkpoint code's own bytes() (docs/serving.md quotes them).
TEST(StateCheckpoint, FlashShapeBytesPerToken) {
    nlohmann::json fn = {
        {"model_type", "qwen4_exp_text"},
        {"vocab_size", 248320},
        {"hidden_size", 2560},
        {"num_hidden_layers", 48},
        {"num_attention_heads", 24},
        {"num_key_value_heads", 2},
        {"head_dim", 256},
        {"rms_norm_eps", 1e-6},
        {"rope_parameters",
         {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}},
        {"linear_conv_kernel_dim", 4},
        {"linear_key_head_dim", 128},
        {"linear_value_head_dim", 128},
        {"linear_num_key_heads", 16},
        {"linear_num_value_heads", 48},
        {"num_experts", 512},
        {"num_experts_per_tok", 10},
        {"moe_intermediate_size", 640},
        {"shared_expert_intermediate_size", 640},
        {"full_attention_interval", 4},
        {"eos_token_id", 248044},
        {"hc_count", 4},
        {"hc_lowrank", 320},
        {"ple_layer_ids", {2}},
        {"ple_embed_dim", 2560},
        {"ple_conv_kernel_size", 4},
        {"ngram_size", 3},
        {"heads_per_ngram", 8},
        {"ngram_vocab_size_base", 20000000},
        {"make_ngram_vocab_size_divisible_by", 128},
        {"split_ngram_parts", 128},
        {"indexer_n_heads", 4},
        {"indexer_kv_heads", 1},
        {"indexer_head_dim", 128},
        {"indexer_budget", 2048},
        {"indexer_compress_ratio", 4},
        {"output_gate_type", "sigmoid"},
        {"mtp_num_hidden_layers", 1}};
    const auto config = model_data::qwen4_exp::parse_config(fn, "fn-config.json");
    const auto prefilled = [&](int64_t n) {
        engine::SequenceState s = engine::make_sequence_state(config, 1, 1);
        for (engine::LayerState& l : s.layers) {
            engine::AttentionCache& a = l.attention;
            if (a.kv_width == 0) continue;
            a.length = n;
            a.n_block_keys = n / config.indexer->compress_ratio;
            a.keys.resize(static_cast<size_t>(n * a.kv_width));
            a.values.resize(static_cast<size_t>(n * a.kv_width));
            a.index_keys.resize(static_cast<size_t>(n * a.index_width));
            a.block_keys.resize(static_cast<size_t>(a.n_block_keys * a.index_width));
        }
        s.position = n;
        s.tokens.assign(static_cast<size_t>(n), 1);
        s.n_pending_residual_rows = n;
        s.pending_residuals.resize(static_cast<size_t>(n * config.hc_width()));
        EXPECT_TRUE(engine::mtp_state_complete(s, config));
        return engine::save_checkpoint(s).bytes();
    };
    const uint64_t short_bytes = prefilled(256);
    const uint64_t long_bytes = prefilled(512);
    const double per_token = static_cast<double>(long_bytes - short_bytes) / 256.0;
    const double fixed = static_cast<double>(short_bytes) - 256.0 * per_token;
    // 12 QSA layers × (K+V 2·2·256 + index 128 + block keys 128/4) floats, C·H = 10240 floats of
    // residual, one token id.
    EXPECT_DOUBLE_EQ(per_token, 12.0 * (2 * 2 * 256 + 128 + 32) * 4 + 10240.0 * 4 + 4);
    // 36 GDN layers × (48·128·128 + 3·10240) floats and one PLE layer's 9·10240: about 112 MiB.
    EXPECT_NEAR(fixed / (1 << 20), 112.4, 0.5);
    std::printf("FN checkpoint: %.0f B per token + %.1f MiB fixed (2000 tokens: %.0f MiB)\n",
                per_token, fixed / (1 << 20), (fixed + 2000 * per_token) / (1 << 20));
}

}  // namespace
}  // namespace cherenkov::testing
