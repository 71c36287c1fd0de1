// The chunked (WY) form of the delta rule that engine/cuda/gated_deltanet_chunked.cu runs for
// prefill, written out on the CPU step for step as the kernels do it, against the token-by-token
// oracle engine::delta_rule_sequential on random inputs. It lives here, not in src/: the CPU
// backend is the reference and stays token by token (so any chunking of a prompt gives its exact
// bits), which leaves this form no engine use besides pinning down the kernels' math.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "engine/model/delta_rule.h"

namespace cherenkov::engine {
namespace {

constexpr int64_t kChunk = 64;  // C, as in the kernels

// Chunk c covers rows [c·C, c·C + L). With S₀ the state before it and, for rows t, s of the chunk,
// G_t = g_0 + … + g_t (the chunk-local cumulative log decay) and Γ_t = exp(G_t), unrolling
// S_t = exp(g_t)·S_{t−1} + k_t u_tᵀ gives
//   S_t = Γ_t·S₀ + Σ_{s≤t} exp(G_t − G_s)·k_s u_sᵀ.
// Putting S_{t−1} into u_t = β_t·(v_t − exp(g_t)·S_{t−1}ᵀk_t):
//   u_t + Σ_{s<t} A[t,s]·u_s = β_t·v_t − β_t·Γ_t·S₀ᵀk_t,   A[t,s] = β_t·exp(G_t − G_s)·(k_t·k_s),
// i.e. (I + A)·U = diag(β)·V − diag(β·Γ)·K·S₀ with A strictly lower triangular. Solving once for
// both right-hand sides (forward substitution, state-free, so every chunk at once):
//   W = (I + A)⁻¹·diag(β·Γ)·K  [L, dk],   Ũ = (I + A)⁻¹·diag(β)·V  [L, dv],   U = Ũ − W·S₀.
// Then the outputs and the next chunk's state:
//   O = diag(Γ)·Q·S₀ + M·U,   M[t,s] = exp(G_t − G_s)·(q_t·k_s) for s ≤ t, else 0,
//   S_L = Γ_{L−1}·S₀ + K̃ᵀ·U,   K̃[s] = exp(G_{L−1} − G_s)·k_s.
// G is summed in double: exp(G_t − G_s) from float sums would lose |G|·2⁻²⁴ to cancellation,
// which after a strongly decaying row (|G| in the hundreds) is no longer below 1e-5.
void delta_rule_chunked(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride) {
    const int64_t dk = in.dk;
    const int64_t dv = in.dv;
    const auto at = [](int64_t row, int64_t col, int64_t width) {
        return static_cast<size_t>(row * width + col);
    };
    std::vector<double> cum(kChunk);
    std::vector<float> gamma(kChunk);
    std::vector<float> tail(kChunk);
    std::vector<float> a(kChunk * kChunk);
    std::vector<float> m(kChunk * kChunk);
    std::vector<float> x(static_cast<size_t>(kChunk * (dk + dv)));  // [W | Ũ] per row
    std::vector<float> u(static_cast<size_t>(kChunk * dv));
    std::vector<float> next(static_cast<size_t>(dk * dv));
    const auto dot = [&](const float* x0, const float* x1) {
        float sum = 0.0F;
        for (int64_t i = 0; i < dk; ++i) sum += x0[i] * x1[i];
        return sum;
    };
    for (int64_t first = 0; first < in.n_rows; first += kChunk) {
        const int64_t n = std::min(kChunk, in.n_rows - first);
        const auto q = [&](int64_t t) { return in.q + (first + t) * in.row_stride; };
        const auto k = [&](int64_t t) { return in.k + (first + t) * in.row_stride; };
        const auto v = [&](int64_t t) { return in.v + (first + t) * in.row_stride; };
        const auto beta = [&](int64_t t) { return in.beta[(first + t) * in.gate_stride]; };

        double sum = 0.0;
        for (int64_t t = 0; t < n; ++t) {
            sum += static_cast<double>(in.log_decay[(first + t) * in.gate_stride]);
            cum[static_cast<size_t>(t)] = sum;
        }
        for (int64_t t = 0; t < n; ++t) {
            const double g = cum[static_cast<size_t>(t)];
            gamma[static_cast<size_t>(t)] = std::exp(static_cast<float>(g));
            tail[static_cast<size_t>(t)] =
                std::exp(static_cast<float>(cum[static_cast<size_t>(n - 1)] - g));
        }
        const auto decay = [&](int64_t t, int64_t s) {
            return std::exp(
                static_cast<float>(cum[static_cast<size_t>(t)] - cum[static_cast<size_t>(s)]));
        };
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t s = 0; s < n; ++s) {
                a[at(t, s, kChunk)] = s < t ? beta(t) * decay(t, s) * dot(k(t), k(s)) : 0.0F;
                m[at(t, s, kChunk)] = s <= t ? decay(t, s) * dot(q(t), k(s)) : 0.0F;
            }
        }

        // (I + A)·X = [β·Γ·K | β·V], column by column.
        const int64_t width = dk + dv;
        for (int64_t col = 0; col < width; ++col) {
            for (int64_t t = 0; t < n; ++t) {
                float acc = col < dk ? beta(t) * gamma[static_cast<size_t>(t)] * k(t)[col]
                                     : beta(t) * v(t)[col - dk];
                for (int64_t s = 0; s < t; ++s) acc -= a[at(t, s, kChunk)] * x[at(s, col, width)];
                x[at(t, col, width)] = acc;
            }
        }

        // U = Ũ − W·S₀, O = diag(Γ)·Q·S₀ + M·U, S ← Γ_{L−1}·S₀ + K̃ᵀ·U.
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t col = 0; col < dv; ++col) {
                float acc = 0.0F;
                for (int64_t i = 0; i < dk; ++i) acc += x[at(t, i, width)] * state[at(i, col, dv)];
                u[at(t, col, dv)] = x[at(t, dk + col, width)] - acc;
            }
        }
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t col = 0; col < dv; ++col) {
                float acc = 0.0F;
                for (int64_t i = 0; i < dk; ++i) {
                    acc += (gamma[static_cast<size_t>(t)] * q(t)[i]) * state[at(i, col, dv)];
                }
                for (int64_t s = 0; s < kChunk && s < n; ++s)
                    acc += m[at(t, s, kChunk)] * u[at(s, col, dv)];
                out[(first + t) * out_stride + col] = acc;
            }
        }
        for (int64_t i = 0; i < dk; ++i) {
            for (int64_t col = 0; col < dv; ++col) {
                float acc = gamma[static_cast<size_t>(n - 1)] * state[at(i, col, dv)];
                for (int64_t t = 0; t < n; ++t)
                    acc += (tail[static_cast<size_t>(t)] * k(t)[i]) * u[at(t, col, dv)];
                next[at(i, col, dv)] = acc;
            }
        }
        std::copy(next.begin(), next.end(), state);
    }
}

uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

float uniform(uint64_t& state) {  // [-1, 1)
    return static_cast<float>(splitmix(state) >> 40) / static_cast<float>(1 << 23) - 1.0F;
}

float softplus(float x) {
    return x > 20.0F ? x : std::log1p(std::exp(x));
}

// How the decays are drawn: per value head, g_t = −exp(a_log)·softplus(a_t + dt_bias).
enum class Decay {
    Trained,  // dt_bias in [−6, 0], A in [1, 16] (the CUDA layer test's draw): from ~0.99 to ~0
    Slow,     // g_t in [−1e-3, 0]: the state keeps everything for hundreds of rows
    Bursty,   // mostly slow, with a strong decay (g ≈ −40) every 17th row
};

// Inputs laid out as the CPU layer has them: rows [T, conv_dim] holding Hk q heads, Hk k heads
// and Hv v heads, and gates [T, Hv].
struct Problem {
    int64_t n_rows, key_heads, value_heads, dk, dv;
    std::vector<float> rows;
    std::vector<float> log_decay;
    std::vector<float> beta;
    std::vector<float> state;  // [Hv, dk, dv]

    int64_t conv_dim() const { return 2 * key_heads * dk + value_heads * dv; }
    DeltaRuleInputs head(int64_t j) const {
        const int64_t hk = j / (value_heads / key_heads);
        DeltaRuleInputs in;
        in.n_rows = n_rows;
        in.dk = dk;
        in.dv = dv;
        in.q = rows.data() + hk * dk;
        in.k = rows.data() + key_heads * dk + hk * dk;
        in.v = rows.data() + 2 * key_heads * dk + j * dv;
        in.row_stride = conv_dim();
        in.log_decay = log_decay.data() + j;
        in.beta = beta.data() + j;
        in.gate_stride = value_heads;
        return in;
    }
};

void l2_normalize(float* x, int64_t n, float scale) {
    float sum = 0.0F;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    const float inv = scale / std::sqrt(sum + 1e-6F);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

Problem make_problem(int64_t n_rows, int64_t key_heads, int64_t value_heads, int64_t dk, int64_t dv,
                     bool initial_state, Decay decay, uint64_t seed) {
    Problem p{n_rows, key_heads, value_heads, dk, dv, {}, {}, {}, {}};
    uint64_t rng = seed;
    const int64_t width = p.conv_dim();
    p.rows.resize(static_cast<size_t>(n_rows * width));
    for (float& x : p.rows) x = uniform(rng);
    for (int64_t t = 0; t < n_rows; ++t) {
        float* row = p.rows.data() + t * width;
        for (int64_t h = 0; h < key_heads; ++h) {
            l2_normalize(row + h * dk, dk, 1.0F / std::sqrt(static_cast<float>(dk)));
            l2_normalize(row + (key_heads + h) * dk, dk, 1.0F);
        }
    }
    std::vector<float> a_scale(static_cast<size_t>(value_heads));
    std::vector<float> dt_bias(static_cast<size_t>(value_heads));
    for (int64_t j = 0; j < value_heads; ++j) {
        a_scale[static_cast<size_t>(j)] = 1.0F + 7.5F * (uniform(rng) + 1.0F);
        dt_bias[static_cast<size_t>(j)] = 3.0F * uniform(rng) - 3.0F;
    }
    p.log_decay.resize(static_cast<size_t>(n_rows * value_heads));
    p.beta.resize(p.log_decay.size());
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t j = 0; j < value_heads; ++j) {
            const auto at = static_cast<size_t>(t * value_heads + j);
            const float raw = uniform(rng);
            float g = -a_scale[static_cast<size_t>(j)] *
                      softplus(0.6F * raw + dt_bias[static_cast<size_t>(j)]);
            if (decay != Decay::Trained) g = -5e-4F * (raw + 1.0F);
            if (decay == Decay::Bursty && t % 17 == 5) g = -40.0F;
            p.log_decay[at] = g;
            p.beta[at] = 1.0F / (1.0F + std::exp(-2.0F * uniform(rng)));
        }
    }
    p.state.assign(static_cast<size_t>(value_heads * dk * dv), 0.0F);
    if (initial_state) {
        for (float& x : p.state) x = 0.5F * uniform(rng);
    }
    return p;
}

// Per element |chunked − sequential| ≤ kTolerance·(rms(sequential) + |sequential|); returns the
// worst |chunked − sequential| / rms(sequential).
constexpr double kTolerance = 1e-5;

double compare(const std::vector<float>& got, const std::vector<float>& want,
               const std::string& what) {
    double sum_squares = 0.0;
    for (const float x : want) sum_squares += static_cast<double>(x) * x;
    const double rms = std::sqrt(sum_squares / static_cast<double>(want.size()));
    double worst = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (!(diff <= kTolerance * (rms + std::fabs(want[i])))) {
            ADD_FAILURE() << what << ": element " << i << " chunked " << got[i] << " sequential "
                          << want[i] << " (rms " << rms << ")";
            return std::numeric_limits<double>::infinity();
        }
        worst = std::max(worst, diff / rms);
    }
    return worst;
}

// Runs both forms over every value head and compares outputs [T, Hv·dv] and final states.
void check(const Problem& p, const std::string& what) {
    const int64_t value_dim = p.value_heads * p.dv;
    const int64_t head_size = p.dk * p.dv;
    std::vector<float> out_seq(static_cast<size_t>(p.n_rows * value_dim));
    std::vector<float> out_chunk(out_seq.size());
    std::vector<float> state_seq = p.state;
    std::vector<float> state_chunk = p.state;
    for (int64_t j = 0; j < p.value_heads; ++j) {
        const DeltaRuleInputs in = p.head(j);
        delta_rule_sequential(in, state_seq.data() + j * head_size, out_seq.data() + j * p.dv,
                              value_dim, nullptr);
        delta_rule_chunked(in, state_chunk.data() + j * head_size, out_chunk.data() + j * p.dv,
                           value_dim);
    }
    const double out = compare(out_chunk, out_seq, what + " outputs");
    const double state = compare(state_chunk, state_seq, what + " final state");
    std::printf("%s: max |chunked-sequential|/rms: outputs %.3g, state %.3g\n", what.c_str(), out,
                state);
}

struct Heads {
    int64_t key_heads, value_heads, dk, dv;
};

void check_all(const Heads& heads, Decay decay, const char* decay_name) {
    for (const int64_t n_rows : {1, 7, 64, 65, 200}) {
        for (const bool initial : {false, true}) {
            const Problem p =
                make_problem(n_rows, heads.key_heads, heads.value_heads, heads.dk, heads.dv,
                             initial, decay, static_cast<uint64_t>(1000 * n_rows + initial));
            check(p, std::string(decay_name) + " Hk=" + std::to_string(heads.key_heads) +
                         " Hv=" + std::to_string(heads.value_heads) +
                         " dk=" + std::to_string(heads.dk) + " dv=" + std::to_string(heads.dv) +
                         " T=" + std::to_string(n_rows) + (initial ? " with state" : ""));
            if (::testing::Test::HasFailure()) return;
        }
    }
}

TEST(DeltaRuleChunked, MatchesSequentialAtHeadDim128) {
    check_all({1, 2, 128, 128}, Decay::Trained, "trained");
    check_all({2, 6, 128, 128}, Decay::Trained, "trained");
}

TEST(DeltaRuleChunked, MatchesSequentialAtSmallOddSizes) {
    check_all({1, 1, 5, 3}, Decay::Trained, "trained");
    check_all({3, 3, 7, 11}, Decay::Trained, "trained");
    check_all({2, 4, 16, 33}, Decay::Trained, "trained");
}

// Decays that keep the state for the whole call, and strong decays between slow ones (where a
// float cumulative log decay would cancel badly).
TEST(DeltaRuleChunked, MatchesSequentialWithSlowAndBurstyDecays) {
    check_all({1, 2, 128, 128}, Decay::Slow, "slow");
    check_all({1, 2, 128, 128}, Decay::Bursty, "bursty");
    check_all({3, 3, 7, 11}, Decay::Bursty, "bursty");
}

}  // namespace
}  // namespace cherenkov::engine
