// --check (engine/runtime/checked_backend.h): a backend run against itself reports no divergence,
// and a backend that differs (the same store with Q2 instead of Q4 routed experts) is reported,
// with the first traced stage that parts from the reference: layer 0's routed-expert output.
#include "engine/runtime/checked_backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/experts/expert_source_factory.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

std::string run_checked(engine::ModelBackend& primary, engine::ModelBackend& reference,
                        const std::vector<int32_t>& tokens) {
    std::unique_ptr<engine::ModelBackend> checked =
        engine::make_checked_backend(primary, reference);
    engine::SequenceState state = checked->new_sequence(64);
    engine::ForwardOptions options;
    options.all_logits = true;
    ::testing::internal::CaptureStderr();
    checked->forward(state, tokens, options);
    checked->forward(state, std::vector<int32_t>{tokens.front()}, engine::ForwardOptions{});
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(engine::backend_stats_json(checked->backend_stats())["check"]["calls"].get<int64_t>(),
              2);
    return err;
}

TEST(CheckedBackend, ABackendAgainstItselfDoesNotDiverge) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::string err =
        run_checked(engine.model, engine.model, reference.tokens("input_ids.len8"));
    EXPECT_NE(err.find("check: forward 8 rows: max |logit diff| 0 "), std::string::npos) << err;
    EXPECT_EQ(err.find("first stage"), std::string::npos) << err;
}

TEST(CheckedBackend, NamesTheFirstStageThatDiverges) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    const std::vector<int> two_bits = {2};
    const engine::ExpertTables tables =
        engine::find_expert_tables(engine.weights->store_dir, two_bits);
    engine::DirectExpertReader q2(tables.at(2).path, tables.at(2).layout);
    engine::Model low_bit(*engine.weights, q2, engine.pool);
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::string err = run_checked(low_bit, engine.model, reference.tokens("input_ids.len8"));
    EXPECT_NE(err.find("first stage off by more than 1e-04 of its rms: layers.0.moe.routed_out"),
              std::string::npos)
        << err;
}

// A token selection passes through: both sides pick (and their logits are still compared), the
// caller gets the primary's ids and no logits unless it asked for them.
TEST(CheckedBackend, PassesATokenSelectionThroughAndComparesBothSides) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len8");
    std::unique_ptr<engine::ModelBackend> checked =
        engine::make_checked_backend(engine.model, engine.model);
    engine::SequenceState state = checked->new_sequence(64);
    engine::TokenSelection selection;
    selection.rows = {engine::TokenChoice{1.0F, 10, 0.9F, 0.5}};
    engine::ForwardOptions options;
    options.select = &selection;
    options.keep_residuals = true;
    ::testing::internal::CaptureStderr();
    const engine::ForwardResult result = checked->forward(state, tokens, options);
    engine::TokenSelection greedy;
    greedy.rows = {engine::TokenChoice{}};
    const engine::MtpResult draft =
        checked->mtp_catch_up(state, result.tokens.at(0), false, nullptr, &greedy);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(result.logits.empty());
    EXPECT_TRUE(draft.logits.empty());
    ASSERT_EQ(result.tokens.size(), 1U);
    ASSERT_EQ(draft.tokens.size(), 1U);
    EXPECT_NE(err.find("check: forward 1 rows: max |logit diff| 0 "), std::string::npos) << err;
    EXPECT_EQ(err.find("picked token"), std::string::npos) << err;
    const nlohmann::json stats = engine::backend_stats_json(checked->backend_stats())["check"];
    EXPECT_EQ(stats["selected_tokens"].get<int64_t>(), 2);
    EXPECT_EQ(stats["selected_equal"].get<int64_t>(), 2);

    engine::SequenceState plain = engine.model.new_sequence(64);
    const engine::ForwardResult direct = engine.model.forward(plain, tokens, options);
    EXPECT_EQ(result.tokens, direct.tokens);
}

}  // namespace
}  // namespace cherenkov::testing
