// The token-by-token delta rule (delta_rule.h): plain loops, kept simple because it is the oracle.
#include "engine/model/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cherenkov::engine {

void delta_rule_sequential(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride,
                           float* const* snapshots) {
    const int64_t dk = in.dk;
    const int64_t dv = in.dv;
    float* s = state;
    std::vector<float> u(static_cast<size_t>(dv));
    for (int64_t t = 0; t < in.n_rows; ++t) {
        const float* q = in.q + t * in.row_stride;
        const float* k = in.k + t * in.row_stride;
        const float* v = in.v + t * in.row_stride;
        const float g = std::exp(in.log_decay[t * in.gate_stride]);
        const float b = in.beta[t * in.gate_stride];
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= g;
        std::fill(u.begin(), u.end(), 0.0F);
        for (int64_t i = 0; i < dk; ++i) {
            const float ki = k[i];
            const float* si = s + i * dv;
            for (int64_t col = 0; col < dv; ++col) u[static_cast<size_t>(col)] += si[col] * ki;
        }
        for (int64_t col = 0; col < dv; ++col) {
            u[static_cast<size_t>(col)] = b * (v[col] - u[static_cast<size_t>(col)]);
        }
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

}  // namespace cherenkov::engine
