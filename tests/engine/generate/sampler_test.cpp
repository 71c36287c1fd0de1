#include "engine/generate/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

std::vector<float> log_probs(const std::vector<double>& probs) {
    std::vector<float> logits;
    logits.reserve(probs.size());
    for (const double p : probs) logits.push_back(static_cast<float>(std::log(p)));
    return logits;
}

// Draws n tokens from the same logits; returns how often each token came up.
std::map<int32_t, int> draw(Sampler& sampler, const std::vector<float>& logits, int n) {
    std::map<int32_t, int> counts;
    for (int index = 0; index < n; ++index) {
        std::vector<float> scratch = logits;
        ++counts[sampler.sample(scratch)];
    }
    return counts;
}

std::set<int32_t> keys(const std::map<int32_t, int>& counts) {
    std::set<int32_t> result;
    for (const auto& [token, count] : counts) result.insert(token);
    return result;
}

TEST(Sampler, ArgmaxTakesTheLowestIndexOnTies) {
    const std::vector<float> logits = {1.0F, 3.0F, -2.0F, 3.0F, 3.0F};
    EXPECT_EQ(argmax(logits), 1);
    EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
}

TEST(Sampler, GreedyIsArgmaxAndIgnoresTheSeed) {
    SamplingOptions options;
    EXPECT_TRUE(options.greedy());
    EXPECT_TRUE(options.allows_speculation());
    for (const uint64_t seed : {0ULL, 1ULL, 77ULL}) {
        options.seed = seed;
        Sampler sampler(options);
        std::vector<float> logits = {0.5F, 2.0F, 2.0F, 1.0F};
        EXPECT_EQ(sampler.sample(logits), 1);
    }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
    SamplingOptions options;
    options.repetition_penalty = 2.0F;
    EXPECT_FALSE(options.allows_speculation());
    Sampler sampler(options);
    sampler.observe(std::vector<int32_t>{0, 1, 0});
    std::vector<float> logits = {3.0F, -2.0F, 1.0F, 0.5F};
    EXPECT_EQ(sampler.sample(logits), 0);  // 1.5 > 1.0
    EXPECT_EQ(logits, (std::vector<float>{1.5F, -4.0F, 1.0F, 0.5F}));
}

TEST(Sampler, PresencePenaltySubtractsOncePerSeenToken) {
    SamplingOptions options;
    options.presence_penalty = 0.5F;
    Sampler sampler(options);
    sampler.observe(std::vector<int32_t>{0, 0, 0, 2});
    std::vector<float> logits = {1.0F, 1.0F, 1.0F};
    EXPECT_EQ(sampler.sample(logits), 1);
    EXPECT_EQ(logits, (std::vector<float>{0.5F, 1.0F, 0.5F}));
}

TEST(Sampler, FrequencyPenaltySubtractsPerOccurrenceCountingPromptAndOutput) {
    SamplingOptions options;
    options.frequency_penalty = 0.25F;
    Sampler sampler(options);
    sampler.observe(std::vector<int32_t>{1, 1});  // prompt
    sampler.observe(1);                           // emitted
    sampler.observe(2);
    std::vector<float> logits = {0.0F, 1.0F, 1.0F};
    sampler.sample(logits);
    EXPECT_EQ(logits, (std::vector<float>{0.0F, 0.25F, 0.75F}));
}

TEST(Sampler, RepetitionPenaltyAppliesBeforePresenceAndFrequency) {
    SamplingOptions options;
    options.repetition_penalty = 2.0F;
    options.presence_penalty = 1.0F;
    options.frequency_penalty = 0.5F;
    Sampler sampler(options);
    sampler.observe(std::vector<int32_t>{0, 0});
    std::vector<float> logits = {4.0F, 0.0F};
    sampler.sample(logits);
    EXPECT_EQ(logits[0], 4.0F / 2.0F - 1.0F - 2 * 0.5F);
    EXPECT_EQ(logits[1], 0.0F);
}

// Probabilities 1/4 and 3/4 at temperature 1 (token 1 ranks first), 1/10 and 9/10 at 0.5: the same
// u = 0.85 falls past token 1's share at temperature 1 and inside it at 0.5. The logits are left
// as given (only penalties change them).
TEST(Sampler, TemperatureScalesTheLogitsBeforeTheDraw) {
    const std::vector<float> logits = {0.0F, static_cast<float>(std::log(3.0))};
    TokenSelector selector;
    TokenChoice choice{1.0F, 0, 1.0F, 0.85};
    EXPECT_EQ(selector.select(logits, choice), 0);
    choice.temperature = 0.5F;
    EXPECT_EQ(selector.select(logits, choice), 1);

    SamplingOptions options;
    options.temperature = 0.5F;
    Sampler sampler(options);
    std::vector<float> scratch = {1.0F, -3.0F};
    sampler.sample(scratch);
    EXPECT_EQ(scratch, (std::vector<float>{1.0F, -3.0F}));
}

// next_choice() draws u exactly as sample() does, so a backend that selects with it continues
// the same random sequence.
TEST(Sampler, NextChoiceConsumesTheRngLikeSample) {
    SamplingOptions options;
    options.temperature = 0.9F;
    options.top_k = 3;
    options.top_p = 0.8F;
    options.seed = 99;
    const std::vector<float> logits = log_probs({0.1, 0.2, 0.3, 0.25, 0.15});
    Sampler by_logits(options);
    Sampler by_choice(options);
    TokenSelector selector;
    for (int step = 0; step < 32; ++step) {
        std::vector<float> scratch = logits;
        const TokenChoice choice = by_choice.next_choice();
        EXPECT_EQ(choice.temperature, 0.9F);
        EXPECT_EQ(choice.top_k, 3);
        EXPECT_EQ(choice.top_p, 0.8F);
        EXPECT_GE(choice.u, 0.0);
        EXPECT_LT(choice.u, 1.0);
        EXPECT_EQ(by_logits.sample(scratch), selector.select(logits, choice)) << step;
    }
    SamplingOptions greedy;
    EXPECT_TRUE(Sampler(greedy).next_choice().greedy());
}

TEST(Sampler, TopKKeepsExactlyTheKBest) {
    SamplingOptions options;
    options.temperature = 1.0F;
    options.top_k = 2;
    Sampler sampler(options);
    const std::vector<float> logits = {0.0F, 5.0F, 4.0F, -1.0F, 4.5F};
    EXPECT_EQ(keys(draw(sampler, logits, 2000)), (std::set<int32_t>{1, 4}));
    // Ties at the cut keep the lower token id.
    options.top_k = 2;
    Sampler tied(options);
    EXPECT_EQ(keys(draw(tied, {1.0F, 2.0F, 1.0F, 1.0F}, 2000)), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
    // Probabilities 0.5, 0.3, 0.15, 0.05 (listed out of order).
    const std::vector<float> logits = log_probs({0.15, 0.5, 0.05, 0.3});
    const std::vector<std::pair<float, std::set<int32_t>>> cases = {
        {0.1F, {1}}, {0.45F, {1}}, {0.75F, {1, 3}}, {0.81F, {1, 3, 0}}, {0.99F, {1, 3, 0, 2}},
    };
    for (const auto& [top_p, expected] : cases) {
        SamplingOptions options;
        options.temperature = 1.0F;
        options.top_p = top_p;
        Sampler sampler(options);
        EXPECT_EQ(keys(draw(sampler, logits, 4000)), expected) << "top_p=" << top_p;
    }
}

TEST(Sampler, TopPAppliesAfterTopK) {
    SamplingOptions options;
    options.temperature = 1.0F;
    options.top_k = 2;
    options.top_p = 0.7F;  // over the top-2 renormalized: 0.5/0.8 = 0.625, then 1.0
    Sampler sampler(options);
    EXPECT_EQ(keys(draw(sampler, log_probs({0.15, 0.5, 0.05, 0.3}), 4000)),
              (std::set<int32_t>{1, 3}));
    options.top_p = 0.6F;
    Sampler narrow(options);
    EXPECT_EQ(keys(draw(narrow, log_probs({0.15, 0.5, 0.05, 0.3}), 4000)), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPOverALargeVocabulary) {
    // 20k tokens, nearly flat: the nucleus needs far more than the first sorted prefix.
    std::vector<float> logits(20000);
    for (size_t index = 0; index < logits.size(); ++index) {
        logits[index] = static_cast<float>(index % 1000) * 1e-4F;
    }
    SamplingOptions options;
    options.temperature = 1.0F;
    options.top_p = 0.9F;
    options.seed = 3;
    Sampler sampler(options);
    const auto counts = draw(sampler, logits, 100);
    std::set<int32_t> residues;
    for (const auto& [token, count] : counts) residues.insert(token % 1000);
    // The lowest tenth of the logits (residues < ~100) is outside the nucleus.
    EXPECT_GE(*residues.begin(), 90);
    EXPECT_GT(residues.size(), 60U);
}

TEST(Sampler, SameSeedGivesTheSameSequence) {
    SamplingOptions options;
    options.temperature = 0.8F;
    options.top_p = 0.95F;
    options.seed = 1234;
    const std::vector<float> logits = log_probs({0.1, 0.2, 0.3, 0.25, 0.15});
    auto sequence = [&](const SamplingOptions& o) {
        Sampler sampler(o);
        std::vector<int32_t> tokens;
        for (int index = 0; index < 64; ++index) {
            std::vector<float> scratch = logits;
            tokens.push_back(sampler.sample(scratch));
        }
        return tokens;
    };
    EXPECT_EQ(sequence(options), sequence(options));
    SamplingOptions other = options;
    other.seed = 1235;
    EXPECT_NE(sequence(options), sequence(other));
}

TEST(Sampler, DrawsFollowTheSoftmax) {
    SamplingOptions options;
    options.temperature = 1.0F;
    options.seed = 42;
    Sampler sampler(options);
    const int n = 20000;
    const auto counts = draw(sampler, log_probs({0.5, 0.3, 0.2}), n);
    EXPECT_NEAR(counts.at(0) / double(n), 0.5, 0.02);
    EXPECT_NEAR(counts.at(1) / double(n), 0.3, 0.02);
    EXPECT_NEAR(counts.at(2) / double(n), 0.2, 0.02);

    // Temperature 0.5 squares the probabilities: 0.25, 0.09, 0.04 over 0.38.
    options.temperature = 0.5F;
    Sampler sharp(options);
    const auto sharp_counts = draw(sharp, log_probs({0.5, 0.3, 0.2}), n);
    EXPECT_NEAR(sharp_counts.at(0) / double(n), 0.25 / 0.38, 0.02);
    EXPECT_NEAR(sharp_counts.at(2) / double(n), 0.04 / 0.38, 0.02);
}

void expect_rejected(SamplingOptions options, const std::string& message) {
    try {
        validate_sampling_options(options);
        FAIL() << "accepted: " << message;
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
}

TEST(Sampler, ValidationNamesTheOption) {
    SamplingOptions options;
    EXPECT_NO_THROW(validate_sampling_options(options));
    options.top_p = 1.5F;
    expect_rejected(options, "--top-p must be in (0, 1], got 1.5");
    options = {};
    options.top_p = 0.0F;
    expect_rejected(options, "--top-p must be in (0, 1], got 0");
    options = {};
    options.temperature = -1.0F;
    expect_rejected(options, "--temperature");
    options = {};
    options.top_k = -3;
    expect_rejected(options, "--top-k must be >= 0, got -3");
    options = {};
    options.repetition_penalty = 0.0F;
    expect_rejected(options, "--repetition-penalty");
    options = {};
    options.presence_penalty = NAN;
    expect_rejected(options, "--presence-penalty must be finite, got nan");
    options = {};
    options.frequency_penalty = INFINITY;
    expect_rejected(options, "--frequency-penalty");
    options = {};
    options.top_p = 0.5F;
    EXPECT_THROW(Sampler{[] {
                     SamplingOptions bad;
                     bad.top_k = -1;
                     return bad;
                 }()},
                 Error);
}

}  // namespace
}  // namespace cherenkov::engine
