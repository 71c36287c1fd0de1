// The MTP head against the reference built from transformers modules (tiny_a/reference/
// mtp.safetensors, docs/qwen4_exp.md §6): the catch-up/prefill rows (draft 1 at every position),
// its §6.3 pieces, and chained second drafts whose MTP cache holds exactly rows 0..p.
#include <gtest/gtest.h>

#include "engine/generate/sampler.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

constexpr const char* kCheckpoint = "tiny_a/hf_flat_fused";

class MtpReference : public ::testing::TestWithParam<const char*> {};

TEST_P(MtpReference, DraftOneRowsAndPiecesMatch) {
    const std::string prompt = GetParam();
    FixtureEngine engine(kCheckpoint);
    ASSERT_TRUE(engine.model.has_mtp());
    ReferenceFile reference("tiny_a/reference/mtp.safetensors");
    const std::vector<int32_t> y = reference.tokens("mtp." + prompt + ".tokens");
    const std::vector<int32_t> prompt_tokens(y.begin(), y.end() - 1);
    const auto n_rows = static_cast<int64_t>(prompt_tokens.size());

    engine::SequenceState state = engine.model.new_sequence(64);
    engine::ForwardTrace trace;
    engine::ForwardOptions options;
    options.keep_residuals = true;
    options.trace = &trace;
    auto trunk = engine.model.forward(state, prompt_tokens, options);
    ASSERT_EQ(engine::argmax(trunk.logits), y.back());
    if (reference.has("mtp." + prompt + ".trunk_residual")) {
        EXPECT_LE(max_abs_diff(state.pending_residuals,
                               reference.read<float>("mtp." + prompt + ".trunk_residual")),
                  1e-4F);
    }
    engine::MtpResult draft = engine.model.mtp_catch_up(state, y.back(), true, &trace);
    EXPECT_EQ(state.mtp_length, n_rows);
    EXPECT_TRUE(state.pending_residuals.empty());
    const int64_t checked = first_tie_row(trace, n_rows);
    const int64_t vocab = engine.model.vocab_size();
    const std::vector<float> expected = reference.read<float>("mtp." + prompt + ".draft1_logits");
    const std::vector<int32_t> ids = reference.tokens("mtp." + prompt + ".draft1_ids");
    ASSERT_EQ(draft.logits.size(), expected.size());
    draft.logits.resize(static_cast<size_t>(checked * vocab));
    EXPECT_LE(max_abs_diff(draft.logits, std::vector<float>(expected.begin(),
                                                            expected.begin() + checked * vocab)),
              1e-3F);
    for (int64_t t = 0; t < checked; ++t) {
        EXPECT_EQ(engine::argmax(
                      std::span(draft.logits)
                          .subspan(static_cast<size_t>(t * vocab), static_cast<size_t>(vocab))),
                  ids[static_cast<size_t>(t)])
            << "row " << t;
    }
    for (const char* piece : {"e_hat", "fe", "h_hat", "U", "r_prime", "mixer_out"}) {
        const std::string name = "mtp." + prompt + "." + piece;
        if (!reference.has(name)) continue;
        const std::vector<float> ref = reference.read<float>(name);
        const std::vector<float>& ours = trace.tensors.at(std::string("mtp.") + piece);
        ASSERT_EQ(ours.size(), ref.size()) << piece;
        const size_t per_row = ref.size() / static_cast<size_t>(n_rows);
        std::vector<float> a(ours.begin(), ours.begin() + static_cast<int64_t>(per_row) * checked);
        std::vector<float> b(ref.begin(), ref.begin() + static_cast<int64_t>(per_row) * checked);
        EXPECT_LE(max_abs_diff(a, b), 1e-4F) << piece;
    }
    std::printf("%s: draft-1 rows checked %lld of %lld\n", prompt.c_str(),
                static_cast<long long>(checked), static_cast<long long>(n_rows));
}

TEST_P(MtpReference, ChainedSecondDraftsMatch) {
    const std::string prompt = GetParam();
    FixtureEngine engine(kCheckpoint);
    ReferenceFile reference("tiny_a/reference/mtp.safetensors");
    const std::vector<int32_t> y = reference.tokens("mtp." + prompt + ".tokens");
    const std::vector<int32_t> draft1 = reference.tokens("mtp." + prompt + ".draft1_ids");
    const std::vector<float> expected = reference.read<float>("mtp." + prompt + ".draft2_logits");
    const int64_t vocab = engine.model.vocab_size();
    const int64_t n_rows = static_cast<int64_t>(y.size()) - 1;
    int64_t checked = 0;
    for (int64_t p = 0; p < n_rows; ++p) {
        engine::SequenceState state = engine.model.new_sequence(64);
        engine::ForwardTrace trace;
        engine::ForwardOptions options;
        options.keep_residuals = true;
        options.trace = &trace;
        engine.model.forward(state, std::span(y).first(static_cast<size_t>(p + 1)), options);
        engine::MtpResult first =
            engine.model.mtp_catch_up(state, y[static_cast<size_t>(p + 1)], false, &trace);
        if (first_tie_row(trace, p + 1) <= p) break;  // the reference broke a tie its own way
        engine::MtpResult second =
            engine.model.mtp_chain(state, draft1[static_cast<size_t>(p)], p + 1, 1);
        std::vector<float> ref(expected.begin() + p * vocab, expected.begin() + (p + 1) * vocab);
        EXPECT_LE(max_abs_diff(second.logits, ref), 1e-3F) << "row " << p;
        ++checked;
    }
    EXPECT_GE(checked, 12);
    std::printf("%s: chained draft-2 rows checked %lld of %lld\n", prompt.c_str(),
                static_cast<long long>(checked), static_cast<long long>(n_rows));
}

INSTANTIATE_TEST_SUITE_P(Prompts, MtpReference, ::testing::Values("len33", "eos_mid"));

}  // namespace
}  // namespace cherenkov::testing
