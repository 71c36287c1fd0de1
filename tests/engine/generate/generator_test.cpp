// Generation: greedy output identical for every draft count (speculation with rollback on the
// tiny_a fixture, which has an MTP head), equal to the reference's greedy continuation, seeded
// sampling reproducible, and context limits checked before any work.
#include "engine/generate/generator.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

std::vector<int32_t> generate(FixtureEngine& engine, const std::vector<int32_t>& prompt,
                              const engine::GenerationOptions& options,
                              engine::GenerationStats* stats = nullptr) {
    return generate_tokens(engine.model, prompt, options, stats);
}

TEST(Generator, GreedyOutputIsTheSameForEveryDraftCount) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len33");
    const auto expected = reference.tokens("greedy.len33.ids");
    engine::GenerationOptions options;
    options.max_tokens = 80;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    std::vector<std::vector<int32_t>> outputs;
    for (int drafts = 0; drafts <= 2; ++drafts) {
        options.drafts = drafts;
        engine::GenerationStats stats;
        outputs.push_back(generate(engine, prompt, options, &stats));
        EXPECT_EQ(stats.generated_tokens, 80);
        EXPECT_EQ(stats.stop_reason, "length");
        EXPECT_EQ(stats.speculation, drafts > 0);
        if (drafts > 0) {
            EXPECT_GT(stats.drafts_proposed[0], 0);
        }
        if (drafts == 2)
            std::printf("drafts 2: proposed %lld/%lld accepted %lld/%lld\n",
                        static_cast<long long>(stats.drafts_proposed[0]),
                        static_cast<long long>(stats.drafts_proposed[1]),
                        static_cast<long long>(stats.drafts_accepted[0]),
                        static_cast<long long>(stats.drafts_accepted[1]));
    }
    EXPECT_EQ(outputs[1], outputs[0]);
    EXPECT_EQ(outputs[2], outputs[0]);
    ASSERT_GE(outputs[0].size(), expected.size());
    EXPECT_EQ(std::vector<int32_t>(outputs[0].begin(),
                                   outputs[0].begin() + static_cast<int64_t>(expected.size())),
              expected);
}

// Drafts forced right or wrong by a pattern: full acceptance (so second drafts are chained),
// partial acceptance and rejection all give the plain greedy output.
TEST(Generator, ForcedAcceptanceAndRejectionKeepGreedyOutput) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.chat");
    engine::GenerationOptions options;
    options.max_tokens = 60;
    options.stop_at_eos = false;
    options.drafts = 0;
    const auto plain = generate(engine, prompt, options);
    options.drafts = 2;
    options.draft_override = [&](int64_t index, int j, int32_t) {
        // Right for most indices, wrong every 7th (index) and for second drafts every 5th.
        const bool wrong = index % 7 == 3 || (j == 1 && index % 5 == 0);
        const int32_t truth = plain[static_cast<size_t>(std::min<int64_t>(index, 59))];
        return wrong ? (truth + 1) % 512 : truth;
    };
    engine::GenerationStats stats;
    const auto speculative = generate(engine, prompt, options, &stats);
    EXPECT_EQ(speculative, plain);
    EXPECT_GT(stats.drafts_accepted[0], 10);
    EXPECT_GT(stats.drafts_proposed[1], 5);
    EXPECT_GT(stats.drafts_accepted[1], 2);
    EXPECT_LT(stats.drafts_accepted[0], stats.drafts_proposed[0]);
    EXPECT_LT(stats.decode_steps, 50);
}

TEST(Generator, StopsAtEosAndAtTheTokenLimit) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    ReferenceFile reference("tiny_c/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len33");
    engine::GenerationOptions options;
    options.max_tokens = 5;
    engine::GenerationStats stats;
    const auto first = generate(engine, prompt, options, &stats);
    ASSERT_EQ(first.size(), 5U);
    EXPECT_EQ(stats.stop_reason, "length");
    // Make the second greedy token an EOS: generation stops right after emitting it.
    options.eos_ids = {first[1]};
    const auto stopped = generate(engine, prompt, options, &stats);
    EXPECT_EQ(stats.stop_reason, "eos");
    EXPECT_EQ(stopped.back(), first[1]);
    EXPECT_LE(stopped.size(), 2U);
}

// tiny_b's config asks for an MTP layer but the checkpoint has no MTP weights: the store
// disables MTP and generation runs without drafts.
TEST(Generator, StoreWithoutMtpWeightsDisablesDrafting) {
    FixtureEngine engine("tiny_b/hf_nested_experts_sharded");
    EXPECT_FALSE(engine.model.has_mtp());
    ReferenceFile reference("tiny_b/reference/logits.safetensors");
    engine::GenerationOptions options;
    options.max_tokens = 8;
    options.drafts = 2;
    engine::GenerationStats stats;
    const auto out = generate(engine, reference.tokens("input_ids.len33"), options, &stats);
    EXPECT_FALSE(stats.speculation);
    EXPECT_EQ(stats.drafts_proposed[0], 0);
    const std::vector<int32_t> expected = reference.tokens("greedy.len33.ids");
    ASSERT_GE(expected.size(), 8U);
    EXPECT_EQ(out, std::vector<int32_t>(expected.begin(), expected.begin() + 8));
}

TEST(Generator, SeededSamplingIsReproducible) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len8");
    engine::GenerationOptions options;
    options.max_tokens = 24;
    options.stop_at_eos = false;
    options.sampling.temperature = 1.0F;
    options.sampling.top_p = 0.9F;
    options.sampling.seed = 7;
    engine::GenerationStats stats;
    const auto a = generate(engine, prompt, options, &stats);
    EXPECT_FALSE(stats.speculation);  // sampling disables MTP verification
    const auto b = generate(engine, prompt, options);
    EXPECT_EQ(a, b);
    options.sampling.seed = 8;
    EXPECT_NE(generate(engine, prompt, options), a);
}

TEST(Generator, RejectsPromptsThatDoNotFitBeforeWork) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    engine::GenerationOptions options;
    options.max_ctx = 4;
    engine::Generator generator(engine.model, options);
    const std::vector<int32_t> prompt = {1, 2, 3, 4};
    EXPECT_THROW(generator.generate(prompt, [](int32_t) { return true; }), cherenkov::Error);
    EXPECT_THROW(generator.generate({}, [](int32_t) { return true; }), cherenkov::Error);
    options.drafts = 3;
    EXPECT_THROW(engine::Generator(engine.model, options), cherenkov::Error);
}

TEST(DraftPolicy, ChainsASecondDraftOnlyAfterFullAcceptanceAndBacksOff) {
    engine::DraftPolicy policy(2);
    EXPECT_EQ(policy.next(), 1);
    policy.record(1, 1);
    EXPECT_EQ(policy.next(), 2);
    policy.record(2, 1);
    EXPECT_EQ(policy.next(), 1);
    for (int i = 0; i < 8; ++i) policy.record(1, 0);
    EXPECT_EQ(policy.next(), 0);  // cooling down after poor acceptance
    int plain = 1;
    while (policy.next() == 0) ++plain;
    EXPECT_EQ(plain, 16);
}

}  // namespace
}  // namespace cherenkov::testing
