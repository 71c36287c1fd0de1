// Per-layer n-gram embeddings (docs/qwen4_exp.md §3.4): gather and dequantize the rows the
// n-gram ids select, gate them against the residual per stream, and add a dilated causal conv of
// the normalized gated value.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/model/layers.h"

namespace cherenkov::engine {

void ple_forward(const PleWeights& weights, PleState& state, std::span<const int64_t> ngram_ids,
                 float* x, int64_t n_rows, const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    const int64_t p_dim = c.ple_embed_dim;
    const int64_t n_heads = c.n_ngram_heads;
    const int64_t dilation = c.ngram_size;
    const int64_t taps = c.ple_conv_kernel_size;
    const int64_t history = c.ple_conv_state_len;  // (Kp-1)·N

    std::vector<float> embedding(static_cast<size_t>(n_rows * p_dim));
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t j = 0; j < n_heads; ++j) {
            weights.gather_row(ngram_ids[static_cast<size_t>(t * n_heads + j)],
                               embedding.data() + t * p_dim + j * weights.width);
        }
    }
    ctx.record("ple.embedding", embedding.data(), n_rows * p_dim);

    std::vector<float> keys(static_cast<size_t>(n_rows * width));
    weights.key.apply(embedding.data(), n_rows, keys.data(), ctx.pool, ctx.activations);
    std::vector<float> value(static_cast<size_t>(n_rows * h));
    weights.value.apply(embedding.data(), n_rows, value.data(), ctx.pool, ctx.activations);

    // hist = [the state's Gn rows ; this call's Gn rows]
    std::vector<float> hist(static_cast<size_t>((history + n_rows) * width));
    std::copy(state.conv.begin(), state.conv.end(), hist.begin());
    std::vector<float> gated(static_cast<size_t>(n_rows * width));
    std::vector<float> query(static_cast<size_t>(width));
    const float inv_sqrt_h = 1.0F / std::sqrt(static_cast<float>(h));
    for (int64_t t = 0; t < n_rows; ++t) {
        float* k = keys.data() + t * width;
        grouped_rms_norm(k, weights.norm_key, width, h, ctx.eps(), k);
        grouped_rms_norm(x + t * width, weights.norm_query, width, h, ctx.eps(), query.data());
        float* g_row = gated.data() + t * width;
        for (int64_t s = 0; s < n_streams; ++s) {
            float dot = 0.0F;
            for (int64_t d = 0; d < h; ++d)
                dot += k[s * h + d] * query[static_cast<size_t>(s * h + d)];
            const float g = dot * inv_sqrt_h;
            float signed_root = 0.0F;
            if (g != 0.0F) signed_root = std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6F)), g);
            const float gate = sigmoid(signed_root);
            for (int64_t d = 0; d < h; ++d)
                g_row[s * h + d] = gate * value[static_cast<size_t>(t * h + d)];
        }
        grouped_rms_norm(g_row, weights.norm_conv, width, h, ctx.eps(),
                         hist.data() + (history + t) * width);
    }

    std::vector<float> out(static_cast<size_t>(n_rows * width));
    for (int64_t t = 0; t < n_rows; ++t) {
        const int64_t now = history + t;
        for (int64_t ch = 0; ch < width; ++ch) {
            float sum = 0.0F;
            for (int64_t j = 0; j < taps; ++j) {
                const int64_t row = now - (taps - 1 - j) * dilation;
                sum += weights.conv[ch * taps + j] * hist[static_cast<size_t>(row * width + ch)];
            }
            out[static_cast<size_t>(t * width + ch)] =
                gated[static_cast<size_t>(t * width + ch)] + silu(sum);
        }
        if (ctx.snapshots != nullptr) {
            auto& snap =
                (*ctx.snapshots)[static_cast<size_t>(t)].ple[static_cast<size_t>(ctx.layer_index)];
            snap.conv.assign(hist.begin() + (t + 1) * width,
                             hist.begin() + (t + 1 + history) * width);
        }
    }
    std::copy(hist.end() - history * width, hist.end(), state.conv.begin());
    ctx.record("ple.out", out.data(), n_rows * width);
    for (int64_t i = 0; i < n_rows * width; ++i) x[i] += out[static_cast<size_t>(i)];
}

}  // namespace cherenkov::engine
