// delta_rule_tokens (what the CPU layer runs) against the plain-loop oracle delta_rule_sequential:
// the same bits for outputs, the final state and every snapshot, with value widths that are and
// are not multiples of the vector width, strided rows and gates, and decays from none to strong.
#include "engine/model/delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cherenkov::engine {
namespace {

struct Case {
    int64_t n_rows, dk, dv;
    float decay_scale;  // log decays drawn from [-decay_scale, 0]
};

void expect_same_bits(const Case& c) {
    std::mt19937 rng(static_cast<uint32_t>(c.n_rows * 131 + c.dk * 7 + c.dv));
    std::normal_distribution<float> normal(0.0F, 1.0F);
    std::uniform_real_distribution<float> unit(0.0F, 1.0F);
    const int64_t row_stride = 2 * c.dk + c.dv + 3;  // q, k, v slices of a wider row
    const int64_t gate_stride = 5;
    std::vector<float> rows(static_cast<size_t>(c.n_rows * row_stride));
    for (float& x : rows) x = normal(rng) * 0.2F;
    std::vector<float> log_decay(static_cast<size_t>(c.n_rows * gate_stride));
    std::vector<float> beta(log_decay.size());
    for (size_t i = 0; i < log_decay.size(); ++i) {
        log_decay[i] = -c.decay_scale * unit(rng);
        beta[i] = 0.05F + 0.9F * unit(rng);
    }
    DeltaRuleInputs in;
    in.n_rows = c.n_rows;
    in.dk = c.dk;
    in.dv = c.dv;
    in.q = rows.data();
    in.k = rows.data() + c.dk;
    in.v = rows.data() + 2 * c.dk;
    in.row_stride = row_stride;
    in.log_decay = log_decay.data();
    in.beta = beta.data();
    in.gate_stride = gate_stride;

    const auto head = static_cast<size_t>(c.dk * c.dv);
    std::vector<float> start(head);
    for (float& x : start) x = normal(rng);
    const int64_t out_stride = c.dv + 2;
    std::vector<float> state_oracle = start, state_fast = start;
    std::vector<float> out_oracle(static_cast<size_t>(c.n_rows * out_stride), -1.0F);
    std::vector<float> out_fast = out_oracle;
    std::vector<std::vector<float>> snaps_oracle(static_cast<size_t>(c.n_rows),
                                                 std::vector<float>(head));
    std::vector<std::vector<float>> snaps_fast = snaps_oracle;
    std::vector<float*> ptr_oracle, ptr_fast;
    for (size_t t = 0; t < snaps_oracle.size(); ++t) {
        ptr_oracle.push_back(snaps_oracle[t].data());
        ptr_fast.push_back(snaps_fast[t].data());
    }
    delta_rule_sequential(in, state_oracle.data(), out_oracle.data(), out_stride,
                          ptr_oracle.data());
    delta_rule_tokens(in, state_fast.data(), out_fast.data(), out_stride, ptr_fast.data());
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same(out_oracle, out_fast)) << "outputs, T=" << c.n_rows << " dv=" << c.dv;
    EXPECT_TRUE(same(state_oracle, state_fast)) << "state, T=" << c.n_rows << " dv=" << c.dv;
    for (size_t t = 0; t < snaps_oracle.size(); ++t) {
        EXPECT_TRUE(same(snaps_oracle[t], snaps_fast[t])) << "snapshot " << t;
    }
    // Without snapshots too (the prefill form).
    std::vector<float> state_plain = start;
    std::vector<float> out_plain(out_oracle.size(), -1.0F);
    delta_rule_tokens(in, state_plain.data(), out_plain.data(), out_stride, nullptr);
    EXPECT_TRUE(same(out_oracle, out_plain));
    EXPECT_TRUE(same(state_oracle, state_plain));
}

TEST(DeltaRuleTokens, GiveTheOraclesBitsForEveryShape) {
    for (const Case& c : {Case{1, 128, 128, 0.5F}, Case{37, 128, 128, 2.0F}, Case{9, 16, 12, 0.0F},
                          Case{20, 8, 20, 8.0F}, Case{3, 32, 7, 1.0F}, Case{64, 64, 64, 0.1F}}) {
        expect_same_bits(c);
    }
}

}  // namespace
}  // namespace cherenkov::engine
