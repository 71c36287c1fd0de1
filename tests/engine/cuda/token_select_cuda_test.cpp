// The op-vs-CPU harness for token selection (suites OpsVsCpu*, as ops_vs_cpu_*_test.cpp): GPU
// token selection (engine/cuda/token_select.cu) against the host definition
// (engine/model/token_selector.h): argmax on random, tie-heavy, NaN, signed-zero and infinite rows
// of the Qwen vocabulary (151,936) and of small odd sizes; sampling (temperature, top-k, top-p)
// at fixed u, on those rows and on peaked ones (a short candidate list), equal to the host
// TokenSelector's pick. Skips without a device; in a build without CUDA it checks that the call
// says so.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"
#include "engine/cuda/token_select.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int64_t kQwenVocab = 151936;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// tokens picked on the device for rows of `logits` [n_rows, vocab], one choice per row; without
// scratch (greedy rows only) each row is reduced by one block.
std::vector<int32_t> device_select(const std::vector<float>& logits, int64_t vocab,
                                   const std::vector<TokenChoice>& choices,
                                   bool with_scratch = true) {
    const auto n_rows = static_cast<int64_t>(choices.size());
    DeviceBuffer d_logits(logits.size() * sizeof(float));
    d_logits.upload(logits.data(), logits.size() * sizeof(float));
    DeviceBuffer d_choices(choices.size() * sizeof(TokenChoice));
    d_choices.upload(choices.data(), choices.size() * sizeof(TokenChoice));
    DeviceBuffer scratch(static_cast<size_t>(n_rows * token_select_scratch_words(vocab)) *
                         sizeof(uint64_t));
    scratch.fill(0xFF);  // poisoned: every key and weight the kernel reads it must have written
    DeviceBuffer d_tokens(choices.size() * sizeof(int32_t));
    d_tokens.fill(0xFF);
    token_select(d_logits.as<float>(), n_rows, vocab, d_choices.as<TokenChoice>(),
                 with_scratch ? scratch.as<uint64_t>() : nullptr, d_tokens.as<int32_t>(), nullptr);
    device_synchronize();
    std::vector<int32_t> tokens(choices.size());
    d_tokens.download(tokens.data(), tokens.size() * sizeof(int32_t));
    return tokens;
}

std::vector<int32_t> host_select(const std::vector<float>& logits, int64_t vocab,
                                 const std::vector<TokenChoice>& choices) {
    TokenSelector selector;
    TokenSelection selection;
    selection.rows = choices;
    return selector.select_rows(logits, static_cast<int64_t>(choices.size()), vocab, selection);
}

// Peaked: 64 random logits far above the rest, so only they weigh anything when sampling (the
// device gathers a 64-candidate list, and top-k cuts fall on both sides of its end).
enum class RowKind {
    Random,
    TieHeavy,
    LastIsMax,
    NaNs,
    AllNaN,
    SignedZeros,
    Infinities,
    Flat,
    Peaked
};

void fill_row(float* row, int64_t vocab, RowKind kind, std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0F, 4.0F);
    std::uniform_int_distribution<int> level(0, 3);
    for (int64_t i = 0; i < vocab; ++i) {
        switch (kind) {
            case RowKind::TieHeavy: row[i] = static_cast<float>(level(rng)); break;
            case RowKind::AllNaN: row[i] = kNaN; break;
            case RowKind::SignedZeros: row[i] = (rng() & 1) != 0 ? -0.0F : -1.0F; break;
            case RowKind::Flat: row[i] = 0.25F; break;
            case RowKind::Peaked: row[i] = normal(rng) - 200.0F; break;
            default: row[i] = normal(rng);
        }
    }
    const auto at = [&](int64_t i) { return static_cast<size_t>(i % vocab); };
    if (kind == RowKind::LastIsMax) row[vocab - 1] = 100.0F;
    if (kind == RowKind::Peaked) {
        for (int n = 0; n < 64; ++n) row[at(static_cast<int64_t>(rng() % 1000003))] = normal(rng);
    }
    if (kind == RowKind::NaNs) {
        row[0] = kNaN;
        for (int n = 0; n < 50; ++n) row[at(static_cast<int64_t>(rng() % 1000003))] = kNaN;
    }
    if (kind == RowKind::SignedZeros) row[at(vocab / 2)] = 0.0F;  // +0 after -0s: ties to -0's
    if (kind == RowKind::Infinities) {
        row[at(vocab / 3)] = kInf;
        row[at(vocab / 5)] = kInf;
        row[at(7)] = -kInf;
    }
}

const RowKind kKinds[] = {RowKind::Random,     RowKind::TieHeavy, RowKind::LastIsMax,
                          RowKind::NaNs,       RowKind::AllNaN,   RowKind::SignedZeros,
                          RowKind::Infinities, RowKind::Flat};

TEST(OpsVsCpuTokenSelect, ArgmaxEqualsTheHostOnEveryKindOfRow) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    std::mt19937_64 rng(1);
    for (const int64_t vocab : {kQwenVocab, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1025}}) {
        const int64_t n_rows = static_cast<int64_t>(std::size(kKinds)) * 2;
        std::vector<float> logits(static_cast<size_t>(n_rows * vocab));
        for (int64_t r = 0; r < n_rows; ++r) {
            fill_row(logits.data() + r * vocab, vocab, kKinds[r % std::size(kKinds)], rng);
        }
        const std::vector<TokenChoice> greedy(static_cast<size_t>(n_rows));
        const std::vector<int32_t> expected = host_select(logits, vocab, greedy);
        EXPECT_EQ(device_select(logits, vocab, greedy), expected) << "vocab " << vocab;
        EXPECT_EQ(device_select(logits, vocab, greedy, false), expected)
            << "vocab " << vocab << ", one block per row";
        for (int64_t r = 0; r < n_rows; ++r) {
            const auto row = std::span<const float>(logits).subspan(static_cast<size_t>(r * vocab),
                                                                    static_cast<size_t>(vocab));
            EXPECT_EQ(expected[static_cast<size_t>(r)], argmax(row));
        }
    }
}

// Well-separated rows (random normal logits, ties) at fixed u over a grid of temperatures, top-k
// and top-p, including the edges k = 1, k ≥ V and tiny top-p. Exact agreement, since both sides
// compute the same integer weights (token_selector.h says where they could differ).
TEST(OpsVsCpuTokenSelect, SamplingEqualsTheHostSelectorForFixedU) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    std::mt19937_64 rng(2);
    const std::vector<float> temperatures = {0.7F, 1.0F, 1.6F};
    const std::vector<int32_t> top_ks = {0, 1, 40, 1000, 200000};
    const std::vector<float> top_ps = {1.0F, 0.9F, 0.5F, 1e-4F};
    const std::vector<double> us = {0.0, 0.13, 0.5, 0.77, 0.999};
    for (const int64_t vocab : {kQwenVocab, int64_t{3}, int64_t{513}}) {
        for (const RowKind kind :
             {RowKind::Random, RowKind::TieHeavy, RowKind::NaNs, RowKind::Infinities, RowKind::Flat,
              RowKind::Peaked, RowKind::LastIsMax}) {
            std::vector<TokenChoice> choices;
            for (const float t : temperatures)
                for (const int32_t k : top_ks)
                    for (const float p : top_ps)
                        choices.push_back({t, k, p, us[choices.size() % us.size()]});
            choices.push_back(TokenChoice{});  // a greedy row among sampled ones
            const auto n_rows = static_cast<int64_t>(choices.size());
            std::vector<float> row(static_cast<size_t>(vocab));
            fill_row(row.data(), vocab, kind, rng);
            std::vector<float> logits;
            for (int64_t r = 0; r < n_rows; ++r)
                logits.insert(logits.end(), row.begin(), row.end());
            const std::vector<int32_t> expected = host_select(logits, vocab, choices);
            const std::vector<int32_t> got = device_select(logits, vocab, choices);
            for (size_t r = 0; r < choices.size(); ++r) {
                EXPECT_EQ(got[r], expected[r])
                    << "vocab " << vocab << " kind " << static_cast<int>(kind) << " T "
                    << choices[r].temperature << " k " << choices[r].top_k << " p "
                    << choices[r].top_p << " u " << choices[r].u;
            }
        }
    }
}

// Many draws from one row: the device follows the host across the whole range of u.
TEST(OpsVsCpuTokenSelect, SamplingFollowsTheHostAcrossU) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    std::mt19937_64 rng(3);
    const int64_t vocab = kQwenVocab;
    std::vector<float> row(static_cast<size_t>(vocab));
    fill_row(row.data(), vocab, RowKind::Random, rng);
    std::vector<TokenChoice> choices;
    std::vector<float> logits;
    for (int draw = 0; draw < 64; ++draw) {
        choices.push_back({0.9F, draw % 2 == 0 ? 0 : 50, 0.95F, (draw + 0.5) / 64.0});
        logits.insert(logits.end(), row.begin(), row.end());
    }
    EXPECT_EQ(device_select(logits, vocab, choices), host_select(logits, vocab, choices));
}

// More sampled rows than one select launch keeps resident: the rows go in several launches.
TEST(OpsVsCpuTokenSelect, ManySampledRowsEqualTheHost) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    std::mt19937_64 rng(4);
    const int64_t vocab = 513;
    std::vector<TokenChoice> choices;
    std::vector<float> logits;
    std::vector<float> row(static_cast<size_t>(vocab));
    for (int r = 0; r < 1500; ++r) {
        fill_row(row.data(), vocab, r % 3 == 0 ? RowKind::Flat : RowKind::Random, rng);
        logits.insert(logits.end(), row.begin(), row.end());
        choices.push_back({0.8F, r % 2 == 0 ? 0 : 20, r % 4 < 2 ? 0.9F : 1.0F, (r + 0.5) / 1500.0});
    }
    EXPECT_EQ(device_select(logits, vocab, choices), host_select(logits, vocab, choices));
}

TEST(OpsVsCpuTokenSelect, RejectsBadShapes) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    EXPECT_THROW(token_select(nullptr, 1, 10, nullptr, nullptr, nullptr, nullptr), Error);
    DeviceBuffer logits(16);
    DeviceBuffer choices(sizeof(TokenChoice));
    DeviceBuffer tokens(4);
    EXPECT_THROW(token_select(logits.as<float>(), 1, 0, choices.as<TokenChoice>(), nullptr,
                              tokens.as<int32_t>(), nullptr),
                 Error);
    EXPECT_THROW(token_select(logits.as<float>(), -1, 4, choices.as<TokenChoice>(), nullptr,
                              tokens.as<int32_t>(), nullptr),
                 Error);
}

TEST(CudaTokenSelectUnavailable, SaysBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    try {
        token_select(nullptr, 1, 1, nullptr, nullptr, nullptr, nullptr);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
