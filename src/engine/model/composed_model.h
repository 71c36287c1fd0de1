// The qwen4_exp model composed once (docs/engine.md "One composition"): forward, decoder layers,
// the MTP head, heads and commit, written here against the ops of a backend (backend_ops.h). The
// CPU model (model.h) and the CUDA model (engine/cuda/cuda_model.h) are this class with their
// backend's ops. Stateless between calls: every sequence's caches live in a SequenceState the
// caller owns. Not thread-safe: one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <vector>

#include "engine/model/backend_ops.h"
#include "engine/model/model_backend.h"
#include "engine/model/model_weights.h"
#include "engine/model/ple_read_ahead.h"

namespace cherenkov::engine {

class ExpertSource;

class ComposedModel : public ModelBackend {
public:
    // `weights` and `experts` must outlive the model.
    ComposedModel(const ModelWeights& weights, ExpertSource& experts,
                  std::unique_ptr<BackendOps> ops);

    const char* name() const override { return ops_->name(); }
    const model_data::qwen4_exp::Config& config() const override { return weights_.config; }
    const ModelWeights& weights() const { return weights_; }
    bool has_mtp() const override { return weights_.mtp.has_value(); }
    SequenceState new_sequence(int64_t max_ctx) const override;
    void set_routing_trace(std::ostream* out) override { routing_trace_ = out; }

    ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                          const ForwardOptions& options) override;
    void commit(SequenceState& state, int64_t n_rows) override;
    MtpResult mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                           ForwardTrace* trace = nullptr,
                           const TokenSelection* select = nullptr) override;
    MtpResult mtp_chain(SequenceState& state, int32_t token, int64_t position, int64_t step,
                        const TokenSelection* select = nullptr) override;

    int64_t max_rows_per_call() const override { return ops_->max_rows_per_call(); }
    BackendStats backend_stats() const override { return ops_->backend_stats(); }
    GpuStageTotals gpu_stage_totals() const override { return ops_->gpu_stage_totals(); }
    GpuStageTotals prefill_gpu_stage_totals() const override {
        return ops_->prefill_gpu_stage_totals();
    }

private:
    // One call: begin_pass, `body`, after_pass.
    template <typename Body>
    void run_pass(SequenceState& state, const PassSpec& spec, Body&& body);
    MtpResult mtp_rows(SequenceState& state, bool chain, std::span<const int32_t> tokens,
                       int64_t first_position, int64_t step, bool all_logits, ForwardTrace* trace,
                       const TokenSelection* select);
    // Mixer and lm_head over x's last spec.logit_rows rows (queued).
    void head(ForwardPass& pass, const PassSpec& spec, Head which, const float* x,
              const char* trace_name);

    const ModelWeights& weights_;
    ExpertSource& experts_;
    std::unique_ptr<BackendOps> ops_;
    std::ostream* routing_trace_ = nullptr;
    int64_t trace_step_ = 0;
    PleReadAhead ple_read_ahead_;
};

// One decoder layer (docs/qwen4_exp.md §3.2) on the residual x [T, C·H] (decoder_layer.cpp).
// `next`: the following trunk layer (lookahead), or null.
void compose_decoder_layer(ForwardPass& pass, const LayerWeights& weights, LayerRef layer,
                           const LayerRef* next, std::string trace_prefix, float* x, int64_t n_rows,
                           const model_data::qwen4_exp::Config& config);

}  // namespace cherenkov::engine
