// Gated DeltaNet (docs/qwen4_exp.md §3.5) with the token-by-token recurrence for every call, so
// per-row states exist for speculative rollback and any chunking gives the same result.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/model/delta_rule.h"
#include "engine/model/layers.h"

namespace cherenkov::engine {

namespace {

float gate_activation(model_data::qwen4_exp::GateActivation act, float z) {
    return act == model_data::qwen4_exp::GateActivation::Sigmoid ? sigmoid(z) : silu(z);
}

}  // namespace

void gated_deltanet_forward(const GatedDeltaNetWeights& weights, GatedDeltaNetState& state,
                            const float* mix, int64_t n_rows, float* y, const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t conv_dim = c.conv_dim;
    const int64_t taps = c.linear_conv_kernel_dim;
    const int64_t n_key_heads = c.linear_num_key_heads;
    const int64_t n_value_heads = c.linear_num_value_heads;
    const int64_t dk = c.linear_key_head_dim;
    const int64_t dv = c.linear_value_head_dim;
    const int64_t key_dim = c.key_dim;
    const int64_t value_dim = c.value_dim;
    const int64_t ratio = n_value_heads / n_key_heads;

    // hist = [the state's Kc-1 pre-conv rows ; this call's rows]
    const int64_t kept = taps - 1;
    std::vector<float> hist(static_cast<size_t>((kept + n_rows) * conv_dim));
    std::copy(state.conv.begin(), state.conv.end(), hist.begin());
    weights.in_qkv.apply(mix, n_rows, hist.data() + kept * conv_dim, ctx.pool, ctx.activations);
    std::vector<float> z(static_cast<size_t>(n_rows * value_dim));
    weights.in_z.apply(mix, n_rows, z.data(), ctx.pool, ctx.activations);
    std::vector<float> beta(static_cast<size_t>(n_rows * n_value_heads));
    weights.in_b.apply(mix, n_rows, beta.data(), ctx.pool, ctx.activations);
    std::vector<float> decay(static_cast<size_t>(n_rows * n_value_heads));
    weights.in_a.apply(mix, n_rows, decay.data(), ctx.pool, ctx.activations);

    // Causal depthwise conv + SiLU, then the per-head q/k normalization.
    std::vector<float> conv(static_cast<size_t>(n_rows * conv_dim));
    for (int64_t t = 0; t < n_rows; ++t) {
        float* out = conv.data() + t * conv_dim;
        for (int64_t ch = 0; ch < conv_dim; ++ch) {
            float sum = 0.0F;
            for (int64_t j = 0; j < taps; ++j) {
                sum += weights.conv[ch * taps + j] *
                       hist[static_cast<size_t>((t + j) * conv_dim + ch)];
            }
            out[ch] = silu(sum);
        }
        const float q_scale = 1.0F / std::sqrt(static_cast<float>(dk));
        for (int64_t hk = 0; hk < n_key_heads; ++hk) {
            float* q = out + hk * dk;
            l2_normalize(q, dk);
            for (int64_t i = 0; i < dk; ++i) q[i] *= q_scale;
            l2_normalize(out + key_dim + hk * dk, dk);
        }
        for (int64_t j = 0; j < n_value_heads; ++j) {
            const size_t at = static_cast<size_t>(t * n_value_heads + j);
            beta[at] = sigmoid(beta[at]);
            decay[at] = -std::exp(weights.a_log[j]) * softplus(decay[at] + weights.dt_bias[j]);
        }
    }

    std::vector<float> heads(static_cast<size_t>(n_rows * value_dim));
    const auto body = [&](size_t begin, size_t end) {
        std::vector<float*> snapshot_rows(ctx.snapshots != nullptr ? static_cast<size_t>(n_rows)
                                                                   : 0);
        for (size_t jj = begin; jj < end; ++jj) {
            const auto j = static_cast<int64_t>(jj);
            const int64_t hk = j / ratio;
            DeltaRuleInputs in;
            in.n_rows = n_rows;
            in.dk = dk;
            in.dv = dv;
            in.q = conv.data() + hk * dk;
            in.k = conv.data() + key_dim + hk * dk;
            in.v = conv.data() + 2 * key_dim + j * dv;
            in.row_stride = conv_dim;
            in.log_decay = decay.data() + j;
            in.beta = beta.data() + j;
            in.gate_stride = n_value_heads;
            for (int64_t t = 0; t < static_cast<int64_t>(snapshot_rows.size()); ++t) {
                auto& snap = (*ctx.snapshots)[static_cast<size_t>(t)]
                                 .gdn[static_cast<size_t>(ctx.layer_index)];
                snapshot_rows[static_cast<size_t>(t)] = snap.recurrent.data() + j * dk * dv;
            }
            delta_rule_tokens(in, state.recurrent.data() + j * dk * dv, heads.data() + j * dv,
                              value_dim, snapshot_rows.empty() ? nullptr : snapshot_rows.data());
        }
    };
    ctx.pool->parallel_for(static_cast<size_t>(n_value_heads), 1, body);

    if (ctx.snapshots != nullptr) {
        for (int64_t t = 0; t < n_rows; ++t) {
            auto& snap =
                (*ctx.snapshots)[static_cast<size_t>(t)].gdn[static_cast<size_t>(ctx.layer_index)];
            snap.conv.assign(hist.begin() + (t + 1) * conv_dim,
                             hist.begin() + (t + 1 + kept) * conv_dim);
        }
    }
    std::copy(hist.end() - kept * conv_dim, hist.end(), state.conv.begin());

    // Gated RMSNorm per head (plain w, norm before gate), then out_proj.
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t j = 0; j < n_value_heads; ++j) {
            float* o = heads.data() + t * value_dim + j * dv;
            rms_norm(o, weights.norm, dv, ctx.eps(), o);
            const float* zj = z.data() + t * value_dim + j * dv;
            for (int64_t col = 0; col < dv; ++col)
                o[col] *= gate_activation(c.output_gate, zj[col]);
        }
    }
    weights.out.apply(heads.data(), n_rows, y, ctx.pool, ctx.activations);
}

}  // namespace cherenkov::engine
