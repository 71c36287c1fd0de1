// The token-by-token delta rule (delta_rule.h): plain loops, kept simple because it is the oracle,
// and the same arithmetic in eight-wide AVX2 vectors for the CPU layer.
#include "engine/model/delta_rule.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/matmul.h"

namespace cherenkov::engine {
namespace {

// Row t's inputs: its q, k and v, the decay factor exp(g_t) and β_t.
struct Row {
    const float* q;
    const float* k;
    const float* v;
    float decay;
    float beta;
};

Row row_at(const DeltaRuleInputs& in, int64_t t) {
    return {in.q + t * in.row_stride, in.k + t * in.row_stride, in.v + t * in.row_stride,
            std::exp(in.log_decay[t * in.gate_stride]), in.beta[t * in.gate_stride]};
}

// u ← β·(v − u), u holding Sᵀk.
void delta_of(const Row& r, int64_t dv, std::vector<float>& u) {
    for (int64_t col = 0; col < dv; ++col) {
        u[static_cast<size_t>(col)] = r.beta * (r.v[col] - u[static_cast<size_t>(col)]);
    }
}

}  // namespace

void delta_rule_sequential(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride,
                           float* const* snapshots) {
    const int64_t dk = in.dk;
    const int64_t dv = in.dv;
    float* s = state;
    std::vector<float> u(static_cast<size_t>(dv));
    for (int64_t t = 0; t < in.n_rows; ++t) {
        const Row r = row_at(in, t);
        const float* q = r.q;
        const float* k = r.k;
        const float g = r.decay;
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= g;
        std::fill(u.begin(), u.end(), 0.0F);
        for (int64_t i = 0; i < dk; ++i) {
            const float ki = k[i];
            const float* si = s + i * dv;
            for (int64_t col = 0; col < dv; ++col) u[static_cast<size_t>(col)] += si[col] * ki;
        }
        delta_of(r, dv, u);
        float* o = out + t * out_stride;
        std::fill(o, o + dv, 0.0F);
        for (int64_t i = 0; i < dk; ++i) {
            float* si = s + i * dv;
            const float ki = k[i];
            const float qi = q[i];
            for (int64_t col = 0; col < dv; ++col) {
                si[col] += ki * u[static_cast<size_t>(col)];
                o[col] += si[col] * qi;
            }
        }
        if (snapshots != nullptr) std::copy(s, s + dk * dv, snapshots[t]);
    }
}

namespace {

// AVX2 without FMA: a multiply and an add stay two roundings, as in the plain loops, so no
// contraction can change a bit. Columns past the last multiple of eight take the plain loops.
__attribute__((target("avx2"))) void delta_rule_avx2(const DeltaRuleInputs& in, float* state,
                                                     float* out, int64_t out_stride,
                                                     float* const* snapshots) {
    const int64_t dk = in.dk;
    const int64_t dv = in.dv;
    const int64_t vector_cols = dv - dv % 8;
    float* s = state;
    std::vector<float> u(static_cast<size_t>(dv));
    for (int64_t t = 0; t < in.n_rows; ++t) {
        const Row r = row_at(in, t);
        const float* q = r.q;
        const float* k = r.k;
        const float g = r.decay;
        const __m256 gv = _mm256_set1_ps(g);
        std::fill(u.begin(), u.end(), 0.0F);
        // S ← g·S row by row, and u += S_i·k_i with the decayed row.
        for (int64_t i = 0; i < dk; ++i) {
            float* si = s + i * dv;
            const float ki = k[i];
            const __m256 kv = _mm256_set1_ps(ki);
            int64_t col = 0;
            for (; col < vector_cols; col += 8) {
                const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(si + col), gv);
                _mm256_storeu_ps(si + col, x);
                _mm256_storeu_ps(u.data() + col, _mm256_add_ps(_mm256_loadu_ps(u.data() + col),
                                                               _mm256_mul_ps(x, kv)));
            }
            for (; col < dv; ++col) {
                si[col] *= g;
                u[static_cast<size_t>(col)] += si[col] * ki;
            }
        }
        delta_of(r, dv, u);
        float* o = out + t * out_stride;
        std::fill(o, o + dv, 0.0F);
        for (int64_t i = 0; i < dk; ++i) {
            float* si = s + i * dv;
            const float ki = k[i];
            const float qi = q[i];
            const __m256 kv = _mm256_set1_ps(ki);
            const __m256 qv = _mm256_set1_ps(qi);
            int64_t col = 0;
            for (; col < vector_cols; col += 8) {
                const __m256 x = _mm256_add_ps(_mm256_loadu_ps(si + col),
                                               _mm256_mul_ps(kv, _mm256_loadu_ps(u.data() + col)));
                _mm256_storeu_ps(si + col, x);
                _mm256_storeu_ps(o + col,
                                 _mm256_add_ps(_mm256_loadu_ps(o + col), _mm256_mul_ps(x, qv)));
            }
            for (; col < dv; ++col) {
                si[col] += ki * u[static_cast<size_t>(col)];
                o[col] += si[col] * qi;
            }
        }
        if (snapshots != nullptr) std::copy(s, s + dk * dv, snapshots[t]);
    }
}

}  // namespace

void delta_rule_tokens(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride,
                       float* const* snapshots) {
    // The matmuls' kernel family (engine/cpu/matmul.h): AVX2 or AVX-512 CPUs, unless the
    // portable one was asked for.
    if (active_kernel_path() != KernelPath::Portable) {
        return delta_rule_avx2(in, state, out, out_stride, snapshots);
    }
    delta_rule_sequential(in, state, out, out_stride, snapshots);
}

}  // namespace cherenkov::engine
