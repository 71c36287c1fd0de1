// One decoder layer (docs/qwen4_exp.md §3.2): PLE, attention-side hyper-connection, the token
// mixer (GDN or QSA), MLP-side hyper-connection and MoE.
#include <vector>

#include "engine/model/layers.h"

namespace cherenkov::engine {

void decoder_layer_forward(const LayerWeights& weights, const LayerWeights* next, LayerState& state,
                           std::span<const int64_t> ngram_ids, float* x, int64_t n_rows,
                           int64_t first_position, const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    if (weights.ple) ple_forward(*weights.ple, state.ple, ngram_ids, x, n_rows, ctx);

    std::vector<float> mix(static_cast<size_t>(n_rows * h));
    std::vector<float> inject(static_cast<size_t>(n_rows * n_streams));
    std::vector<float> y(static_cast<size_t>(n_rows * h));
    hyper_connection_mix(weights.attn_hc, x, n_rows, ctx, mix.data(), inject.data());
    ctx.record("attn_hc.mix", mix.data(), n_rows * h);
    ctx.record("attn_hc.inject", inject.data(), n_rows * n_streams);
    if (weights.gdn) {
        gated_deltanet_forward(*weights.gdn, state.gdn, mix.data(), n_rows, y.data(), ctx);
    } else {
        sparse_attention_forward(*weights.qsa, state.attention, mix.data(), n_rows, first_position,
                                 y.data(), ctx);
    }
    ctx.record("mixer_out", y.data(), n_rows * h);
    hyper_connection_combine(x, inject.data(), y.data(), n_rows, n_streams, h);
    ctx.record("x_mid", x, n_rows * width);

    hyper_connection_mix(weights.mlp_hc, x, n_rows, ctx, mix.data(), inject.data());
    ctx.record("mlp_hc.mix", mix.data(), n_rows * h);
    ctx.record("mlp_hc.inject", inject.data(), n_rows * n_streams);
    moe_forward(weights.moe, next != nullptr ? &next->moe : nullptr, mix.data(), n_rows, y.data(),
                ctx);
    hyper_connection_combine(x, inject.data(), y.data(), n_rows, n_streams, h);
    ctx.record("x_out", x, n_rows * width);
}

}  // namespace cherenkov::engine
