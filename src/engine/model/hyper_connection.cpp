// Hyper-connection mix and combine (docs/qwen4_exp.md §3.3).
#include <vector>

#include "engine/model/layers.h"

namespace cherenkov::engine {

void hyper_connection_mix(const HyperConnectionWeights& weights, const float* x, int64_t n_rows,
                          const LayerContext& ctx, float* mix, float* inject) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    const int64_t rank = c.hc_lowrank;
    const float inv_streams = 1.0F / static_cast<float>(n_streams);

    std::vector<float> normed(static_cast<size_t>(n_rows * width));
    for (int64_t t = 0; t < n_rows; ++t) {
        grouped_rms_norm(x + t * width, weights.norm, width, h, ctx.eps(),
                         normed.data() + t * width);
    }
    std::vector<float> down(static_cast<size_t>(n_rows * rank));
    weights.down.apply(normed.data(), n_rows, down.data(), ctx.pool, ctx.activations);
    for (float& v : down) v = silu(v * inv_streams);
    std::vector<float> gates(static_cast<size_t>(n_rows * width));
    weights.up.apply(down.data(), n_rows, gates.data(), ctx.pool, ctx.activations);

    for (int64_t t = 0; t < n_rows; ++t) {
        const float* g = gates.data() + t * width;
        const float* xn = normed.data() + t * width;
        float* m = mix + t * h;
        for (int64_t d = 0; d < h; ++d) {
            float sum = 0.0F;
            for (int64_t s = 0; s < n_streams; ++s) {
                sum += sigmoid(g[s * h + d]) * xn[s * h + d];
            }
            m[d] = sum * inv_streams;
        }
    }
    if (inject != nullptr && weights.inject) {
        weights.inject->apply(normed.data(), n_rows, inject, ctx.pool, ctx.activations);
        for (int64_t i = 0; i < n_rows * n_streams; ++i) {
            inject[i] = 2.0F * sigmoid(inject[i] * inv_streams);
        }
    }
}

void hyper_connection_combine(float* x, const float* inject, const float* y, int64_t n_rows,
                              int64_t n_streams, int64_t hidden) {
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t s = 0; s < n_streams; ++s) {
            const float w = inject[t * n_streams + s];
            float* xs = x + (t * n_streams + s) * hidden;
            const float* yt = y + t * hidden;
            for (int64_t d = 0; d < hidden; ++d) xs[d] += w * yt[d];
        }
    }
}

}  // namespace cherenkov::engine
