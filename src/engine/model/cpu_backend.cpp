#include "engine/model/cpu_backend.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/model/layers.h"

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

namespace {

int64_t compress_ratio(const q4::Config& c) {
    return c.indexer ? c.indexer->compress_ratio : 0;
}

}  // namespace

// One call on the CPU: every op runs when it is called.
class CpuPass final : public ForwardPass {
public:
    CpuPass(CpuBackendOps& ops, SequenceState& state, const PassSpec& spec)
        : ops_(ops), weights_(ops.weights_), c_(ops.weights_.config), state_(state), spec_(spec) {
        ctx_.config = &c_;
        ctx_.pool = &ops.pool_;
        ctx_.activations = ops.activations_;
        ctx_.experts = &ops.experts_;
        ctx_.rope = &ops.rope_;
        ctx_.trace = spec.trace;
        ctx_.routing_trace = spec.routing_trace;
        ctx_.trace_step = spec.trace_step;
        if (spec.snapshot_rows) {
            state.row_snapshots.assign(static_cast<size_t>(spec.n_rows()), RowSnapshot{});
            for (RowSnapshot& snap : state.row_snapshots) {
                snap.gdn.resize(weights_.layers.size());
                snap.ple.resize(weights_.layers.size());
                for (size_t l = 0; l < weights_.layers.size(); ++l) {
                    if (weights_.layers[l].gdn) {
                        snap.gdn[l].recurrent.resize(state.layers[l].gdn.recurrent.size());
                    }
                }
            }
        } else {
            state.row_snapshots.clear();
        }
    }

    float* call_array(int64_t n) override { return take(call_arrays_, n); }
    float* layer_array(int64_t n) override { return take(layer_arrays_, n); }
    void set_trace_prefix(std::string prefix) override { ctx_.trace_prefix = std::move(prefix); }
    void record(const char* name, const float* data, int64_t n) override {
        ctx_.record(name, data, n);
    }

    void embed(float* x, float* first) override {
        const int64_t h = c_.hidden_size;
        const int64_t width = c_.hc_width();
        for (int64_t t = 0; t < rows(); ++t) {
            float* row = first + t * h;
            weights_.embed.row(spec_.tokens[static_cast<size_t>(t)], row);
            for (int64_t s = 0; s < c_.hc_count; ++s)
                std::copy(row, row + h, x + t * width + s * h);
        }
    }
    void mtp_embed(float* e) override {
        for (int64_t t = 0; t < rows(); ++t) {
            weights_.mtp->embed.row(spec_.tokens[static_cast<size_t>(t)], e + t * c_.hidden_size);
        }
    }
    void residual_input(float* h) override {
        const std::vector<float>& from =
            spec_.chain ? state_.mtp_chain_residual : state_.pending_residuals;
        const auto n = static_cast<size_t>(rows() * c_.hc_width());
        if (from.size() != n) {
            throw_internal(spec_.chain ? "a chained draft without a previous MTP call"
                                       : "the pending residuals do not match the catch-up rows");
        }
        std::copy(from.begin(), from.end(), h);
    }
    void mtp_norm(MtpNorm which, float* x, int64_t n_rows, int64_t width) override {
        const float* w = which == MtpNorm::Embedding ? weights_.mtp->pre_fc_norm_embedding
                                                     : weights_.mtp->pre_fc_norm_hidden;
        for (int64_t t = 0; t < n_rows; ++t)
            rms_norm(x + t * width, w, width, ctx_.eps(), x + t * width);
    }
    void mtp_linear(MtpLinear which, const float* x, int64_t n_rows, float* y) override {
        const Linear& l =
            which == MtpLinear::FcEmbedding ? weights_.mtp->fc_embedding : weights_.mtp->fc_hidden;
        l.apply(x, n_rows, y, ctx_.pool, ctx_.activations);
    }
    void add_per_stream(float* x, const float* f) override {
        const int64_t h = c_.hidden_size;
        for (int64_t t = 0; t < rows(); ++t) {
            for (int64_t s = 0; s < c_.hc_count; ++s) {
                float* u = x + t * c_.hc_width() + s * h;
                const float* ft = f + t * h;
                for (int64_t d = 0; d < h; ++d) u[d] += ft[d];
            }
        }
    }

    void begin_layer(LayerRef layer, std::string trace_prefix) override {
        layer_ = layer;
        ctx_.trace_prefix = std::move(trace_prefix);
        ctx_.layer_index = static_cast<int64_t>(layer.index);
        // Verification snapshots are of trunk layers only.
        ctx_.snapshots = spec_.snapshot_rows && !layer.mtp ? &state_.row_snapshots : nullptr;
    }
    void end_layer() override { layer_arrays_.clear(); }
    void ple(float* x) override {
        // Only trunk calls gather n-gram ids (an MTP layer has no PLE in qwen4_exp).
        const std::span<const int64_t> ids =
            layer_.mtp || spec_.ngram_ids == nullptr
                ? std::span<const int64_t>()
                : std::span<const int64_t>((*spec_.ngram_ids)[layer_.index]);
        ple_forward(*weights_of(layer_).ple, state_of(layer_).ple, ids, x, rows(), ctx_);
    }
    void mix(Mixer which, const float* x, int64_t n_rows, float* mix, float* inject) override {
        hyper_connection_mix(mixer(which), x, n_rows, ctx_, mix, inject);
    }
    void token_mixer(const float* mix, float* y) override {
        const LayerWeights& w = weights_of(layer_);
        LayerState& s = state_of(layer_);
        if (w.gdn) {
            gated_deltanet_forward(*w.gdn, s.gdn, mix, rows(), y, ctx_);
        } else {
            sparse_attention_forward(*w.qsa, s.attention, mix, rows(), spec_.first_position, y,
                                     ctx_);
        }
    }
    void combine(float* x, const float* inject, const float* y) override {
        hyper_connection_combine(x, inject, y, rows(), c_.hc_count, c_.hidden_size);
    }
    // The host computes every block: there is nothing to queue before the routing.
    MoePath moe_path() override { return MoePath::Host; }
    void moe_on_device(const float*, float*, float*, const float*) override {
        throw_internal("the CPU backend has no device-routed MoE");
    }
    void moe_route(const float*, const LayerRef*) override {}
    void moe_finish(const float* mix, const LayerRef* next, float* y, float* x,
                    const float* inject) override {
        moe_forward(weights_of(layer_).moe, next != nullptr ? &weights_of(*next).moe : nullptr, mix,
                    rows(), y, ctx_);
        combine(x, inject, y);
    }
    void layer_region(const float*, const std::function<void()>& body) override { body(); }

    void step(const std::function<void()>& body) override { body(); }
    void head(Head which, const float* mix, int64_t n_rows) override {
        const Linear& lm_head = which == Head::Trunk ? weights_.lm_head : weights_.mtp->lm_head;
        logits_.resize(static_cast<size_t>(n_rows * c_.vocab_size));
        lm_head.apply(mix, n_rows, logits_.data(), ctx_.pool, ctx_.activations);
        if (spec_.select == nullptr) return;
        tokens_ = ops_.selector_.select_rows(logits_, n_rows, c_.vocab_size, *spec_.select);
        if (!spec_.select->keep_logits) logits_.clear();
    }
    void collect(std::vector<float>& logits, std::vector<int32_t>& tokens) override {
        logits = std::move(logits_);
        tokens = std::move(tokens_);
    }
    void keep_residuals(const float* x) override {
        state_.pending_residuals.insert(state_.pending_residuals.end(), x,
                                        x + rows() * c_.hc_width());
    }
    void keep_chain_residual(const float* x) override {
        const int64_t width = c_.hc_width();
        state_.mtp_chain_residual.assign(x + (rows() - 1) * width, x + rows() * width);
    }

private:
    int64_t rows() const { return spec_.n_rows(); }
    const LayerWeights& weights_of(LayerRef l) const {
        return l.mtp ? weights_.mtp->layers[l.index] : weights_.layers[l.index];
    }
    LayerState& state_of(LayerRef l) const {
        return l.mtp ? state_.mtp_layers[l.index] : state_.layers[l.index];
    }
    const HyperConnectionWeights& mixer(Mixer which) const {
        switch (which) {
            case Mixer::Attention: return weights_of(layer_).attn_hc;
            case Mixer::Mlp: return weights_of(layer_).mlp_hc;
            case Mixer::Final: return weights_.final_mixer;
            case Mixer::MtpHead: return weights_.mtp->mixer;
        }
        throw_internal("unknown mixer");
    }
    static float* take(std::deque<std::vector<float>>& arrays, int64_t n) {
        return arrays.emplace_back(static_cast<size_t>(n)).data();
    }

    CpuBackendOps& ops_;
    const ModelWeights& weights_;
    const q4::Config& c_;
    SequenceState& state_;
    const PassSpec& spec_;
    LayerContext ctx_;
    LayerRef layer_;
    std::deque<std::vector<float>> call_arrays_;
    std::deque<std::vector<float>> layer_arrays_;
    std::vector<float> logits_;
    std::vector<int32_t> tokens_;
};

CpuBackendOps::CpuBackendOps(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool,
                             ActivationPrecision activations)
    : weights_(weights),
      experts_(experts),
      pool_(pool),
      activations_(activations),
      rope_(weights.config.rope.rope_theta, weights.config.rotary_dim) {}

SequenceState CpuBackendOps::new_sequence(int64_t max_ctx) const {
    return make_sequence_state(
        weights_.config, max_ctx,
        weights_.mtp ? static_cast<int64_t>(weights_.mtp->layers.size()) : 0);
}

std::unique_ptr<ForwardPass> CpuBackendOps::begin_pass(SequenceState& state, const PassSpec& spec) {
    return std::make_unique<CpuPass>(*this, state, spec);
}

void CpuBackendOps::rollback_layer(SequenceState& state, size_t layer, int64_t row, int64_t keep) {
    const RowSnapshot& snap = state.row_snapshots[static_cast<size_t>(row)];
    LayerState& s = state.layers[layer];
    const LayerWeights& w = weights_.layers[layer];
    if (w.gdn) s.gdn = snap.gdn[layer];
    if (w.ple) s.ple = snap.ple[layer];
    if (w.qsa) s.attention.truncate(keep, compress_ratio(weights_.config));
}

void CpuBackendOps::truncate_mtp_attention(SequenceState& state, size_t layer, int64_t n) {
    state.mtp_layers[layer].attention.truncate(n, compress_ratio(weights_.config));
}

void CpuBackendOps::truncate_residuals(SequenceState& state, int64_t rows) {
    const auto n = static_cast<size_t>(rows * weights_.config.hc_width());
    if (state.pending_residuals.size() > n) state.pending_residuals.resize(n);
}

void CpuBackendOps::clear_residuals(SequenceState& state) {
    state.pending_residuals.clear();
}

}  // namespace cherenkov::engine
