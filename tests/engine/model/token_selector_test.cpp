// The shared selection definition (engine/model/token_selector.h): argmax ties, NaN and signed
// zeros; the key order; top-k and top-p edges; the draw's cumulative rule at fixed u; and the
// partial-sorting TokenSelector against a plain full-sort reading of the definition on random and
// tie-heavy rows larger than its first sorted prefix.
#include "engine/model/token_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The definition read literally: sort every candidate, keep k, cut at top-p, walk to the draw.
int32_t reference_select(const std::vector<float>& logits, const TokenChoice& choice) {
    if (choice.greedy()) {
        std::vector<uint64_t> keys;
        for (size_t i = 0; i < logits.size(); ++i)
            keys.push_back(selection_key(logits[i], static_cast<int32_t>(i)));
        const uint64_t best = *std::max_element(keys.begin(), keys.end());
        return static_cast<int32_t>(0xFFFFFFFFU - static_cast<uint32_t>(best));
    }
    struct Candidate {
        uint64_t key;
        float s;
        int32_t token;
    };
    std::vector<Candidate> all;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float s = logits[i] / choice.temperature;
        all.push_back({selection_key(s, static_cast<int32_t>(i)), s, static_cast<int32_t>(i)});
    }
    std::sort(all.begin(), all.end(),
              [](const Candidate& a, const Candidate& b) { return a.key > b.key; });
    if (choice.top_k > 0 && static_cast<size_t>(choice.top_k) < all.size()) {
        all.resize(static_cast<size_t>(choice.top_k));
    }
    if (!std::isfinite(all[0].s)) return all[0].token;
    std::vector<uint64_t> weights;
    uint64_t total = 0;
    for (const Candidate& c : all) {
        weights.push_back(selection_weight(c.s, all[0].s));
        total += weights.back();
    }
    size_t n = all.size();
    if (choice.top_p < 1.0F) {
        const uint64_t target = top_p_target(choice.top_p, total);
        uint64_t cumulative = 0;
        for (n = 0; n < all.size() && cumulative < target; ++n) cumulative += weights[n];
        total = cumulative;
    }
    const uint64_t draw = draw_threshold(choice.u, total);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < n; ++i) {
        cumulative += weights[i];
        if (draw < cumulative) return all[i].token;
    }
    ADD_FAILURE() << "the draw ran past the nucleus";
    return -1;
}

TEST(TokenSelector, ArgmaxTakesTheLowestIndexOfTheLargestNumber) {
    EXPECT_EQ(argmax(std::vector<float>{1.0F, 3.0F, -2.0F, 3.0F}), 1);
    EXPECT_EQ(argmax(std::vector<float>{7.0F}), 0);
    // -0 and +0 are equal: the lower index wins either way round.
    EXPECT_EQ(argmax(std::vector<float>{-1.0F, -0.0F, 0.0F}), 1);
    EXPECT_EQ(argmax(std::vector<float>{-1.0F, 0.0F, -0.0F}), 1);
    EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf}), 0);
    EXPECT_EQ(argmax(std::vector<float>{1.0F, kInf, kInf}), 1);
}

TEST(TokenSelector, ArgmaxIgnoresNaNUnlessEveryValueIsNaN) {
    EXPECT_EQ(argmax(std::vector<float>{kNaN, 1.0F, 2.0F}), 2);
    EXPECT_EQ(argmax(std::vector<float>{1.0F, kNaN, 0.5F}), 0);
    EXPECT_EQ(argmax(std::vector<float>{kNaN, -kInf, kNaN}), 1);
    EXPECT_EQ(argmax(std::vector<float>{-kNaN, kNaN}), 0);
}

TEST(TokenSelector, KeysOrderValuesThenLowerIndices) {
    const std::vector<float> ascending = {kNaN, -kInf,  -1e30F, -1.0F, -1e-40F,
                                          0.0F, 1e-40F, 1.0F,   1e30F, kInf};
    for (size_t i = 1; i < ascending.size(); ++i) {
        EXPECT_LT(selection_key(ascending[i - 1], 0), selection_key(ascending[i], 0)) << i;
    }
    EXPECT_EQ(selection_key(-0.0F, 5), selection_key(0.0F, 5));
    EXPECT_EQ(selection_key(-kNaN, 5), selection_key(kNaN, 5));
    EXPECT_GT(selection_key(2.0F, 3), selection_key(2.0F, 4));
}

TEST(TokenSelector, GreedyIgnoresTheOtherFields) {
    TokenSelector selector;
    const std::vector<float> logits = {0.5F, 2.0F, 2.0F, 1.0F};
    EXPECT_EQ(selector.select(logits, TokenChoice{0.0F, 1, 0.1F, 0.99}), 1);
}

// Probabilities 0.5, 0.3, 0.2 (listed out of order): u walks the cumulative shares in rank order.
TEST(TokenSelector, TheDrawWalksCumulativeWeightsInRankOrder) {
    const std::vector<float> logits = {static_cast<float>(std::log(0.3)),
                                       static_cast<float>(std::log(0.2)),
                                       static_cast<float>(std::log(0.5))};
    TokenSelector selector;
    const std::vector<std::pair<double, int32_t>> cases = {
        {0.0, 2}, {0.3, 2}, {0.49, 2}, {0.51, 0}, {0.79, 0}, {0.81, 1}, {0.999999, 1}};
    for (const auto& [u, token] : cases) {
        EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 0, 1.0F, u}), token) << "u=" << u;
    }
}

TEST(TokenSelector, TopKEdges) {
    TokenSelector selector;
    const std::vector<float> logits = {1.0F, 2.0F, 1.0F, 1.0F};
    // k = 1 is greedy whatever u is; k >= V is off.
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 1, 1.0F, 0.999}), 1);
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 4, 1.0F, 0.999}), 3);
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 9, 1.0F, 0.999}), 3);
    // Ties at the cut keep the lower ids: k = 2 keeps tokens 1 and 0, never 2 or 3.
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 2, 1.0F, 0.999}), 0);
}

TEST(TokenSelector, TopPEdges) {
    TokenSelector selector;
    const std::vector<float> logits = {static_cast<float>(std::log(0.3)),
                                       static_cast<float>(std::log(0.2)),
                                       static_cast<float>(std::log(0.5))};
    // A tiny top-p keeps only the best; 0.6 keeps two (0.5 does not reach it), renormalized.
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 0, 1e-6F, 0.999}), 2);
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 0, 0.6F, 0.999}), 0);
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 0, 0.6F, 0.6}), 2);  // 0.6·0.8 < 0.5
    // After top-k 2 the shares are 0.625 / 0.375: top-p 0.6 keeps only the best.
    EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 2, 0.6F, 0.999}), 2);

    EXPECT_EQ(top_p_target(1.0F, 10), 10U);
    EXPECT_EQ(top_p_target(0.5F, 3), 2U);  // ceil(1.5)
    EXPECT_EQ(top_p_target(1e-30F, 3), 1U);
    EXPECT_EQ(draw_threshold(0.0, 10), 0U);
    EXPECT_EQ(draw_threshold(0.95, 10), 9U);
    EXPECT_EQ(draw_threshold(1.0 - 0x1p-53, 3), 2U);
    EXPECT_LT(draw_threshold(1.0 - 0x1p-53, uint64_t{1} << 60), uint64_t{1} << 60);
}

TEST(TokenSelector, NonFiniteLogitsInSampling) {
    TokenSelector selector;
    // +inf wins outright (the lowest id of several); nothing finite gives the first in rank.
    EXPECT_EQ(selector.select(std::vector<float>{1.0F, kInf, 3.0F, kInf},
                              TokenChoice{1.0F, 0, 1.0F, 0.9}),
              1);
    EXPECT_EQ(selector.select(std::vector<float>{-kInf, -kInf}, TokenChoice{1.0F, 0, 1.0F, 0.9}),
              0);
    EXPECT_EQ(selector.select(std::vector<float>{kNaN, -kInf}, TokenChoice{1.0F, 0, 1.0F, 0.9}), 1);
    // NaN and -inf weigh nothing: every u picks one of the two finite tokens.
    const std::vector<float> logits = {kNaN, 0.0F, -kInf, 0.0F, kNaN};
    for (const double u : {0.0, 0.25, 0.49, 0.51, 0.99}) {
        EXPECT_EQ(selector.select(logits, TokenChoice{1.0F, 0, 1.0F, u}), u < 0.5 ? 1 : 3) << u;
    }
}

// A token 2^-40 below the best weighs nothing (the fixed-point resolution).
TEST(TokenSelector, WeightsBelowTheResolutionAreZero) {
    EXPECT_EQ(selection_weight(0.0F, 0.0F), uint64_t{1} << kWeightBits);
    EXPECT_EQ(selection_weight(-40.0F, 0.0F), 0U);
    EXPECT_EQ(selection_weight(kNaN, 0.0F), 0U);
    EXPECT_EQ(selection_weight(-kInf, 0.0F), 0U);
    TokenSelector selector;
    EXPECT_EQ(selector.select(std::vector<float>{-40.0F, 0.0F}, TokenChoice{1.0F, 0, 1.0F, 0.9999}),
              1);
}

TEST(TokenSelector, PartialSortingEqualsTheFullSortReference) {
    std::mt19937_64 rng(11);
    std::normal_distribution<float> normal(0.0F, 3.0F);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    TokenSelector selector;
    for (int trial = 0; trial < 300; ++trial) {
        const size_t vocab = trial % 3 == 0 ? 3000 : (trial % 3 == 1 ? 700 : 17);
        std::vector<float> logits(vocab);
        for (float& v : logits) {
            v = normal(rng);
            if (trial % 2 == 1) v = std::round(v);  // tie-heavy rows
        }
        if (trial % 5 == 0) logits[rng() % vocab] = kNaN;
        const int32_t top_k = std::vector<int32_t>{0, 1, 5, 40, 300, 5000}[trial % 6];
        const float top_p = std::vector<float>{1.0F, 0.9F, 0.5F, 0.99F}[trial % 4];
        const float temperature = std::vector<float>{1.0F, 0.7F, 2.5F}[trial % 3];
        const TokenChoice choice{temperature, top_k, top_p, uniform(rng)};
        EXPECT_EQ(selector.select(logits, choice), reference_select(logits, choice))
            << "trial " << trial;
    }
}

TEST(TokenSelector, SelectRowsNeedsOneChoicePerRow) {
    TokenSelector selector;
    const std::vector<float> logits = {0.0F, 1.0F, 5.0F, 2.0F};
    TokenSelection selection;
    selection.rows = {TokenChoice{}, TokenChoice{}};
    EXPECT_EQ(selector.select_rows(logits, 2, 2, selection), (std::vector<int32_t>{1, 0}));
    selection.rows.pop_back();
    try {
        selector.select_rows(logits, 2, 2, selection);
        FAIL() << "accepted one choice for two rows";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("rows has 1 choices; the call returns 2"),
                  std::string::npos)
            << error.what();
    }
}

}  // namespace
}  // namespace cherenkov::engine
