// The CPU backend's pieces of a decoder layer (docs/qwen4_exp.md §3.2-§3.7) over T rows at once.
// Activations are float32, row-major [T, width]. Internal to engine/model: cpu_backend.cpp runs
// them as the ops the one composition (composed_model.h) calls; tests reach them through Model.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "engine/model/forward_trace.h"
#include "engine/model/model_weights.h"
#include "engine/model/ops.h"
#include "engine/model/sequence_state.h"

namespace cherenkov::engine {

class ExpertSource;
class ThreadPool;

// What every layer function needs besides its weights and state.
struct LayerContext {
    const model_data::qwen4_exp::Config* config = nullptr;
    ThreadPool* pool = nullptr;
    ActivationPrecision activations = ActivationPrecision::F32;  // of every matmul
    ExpertSource* experts = nullptr;
    const Rope* rope = nullptr;
    ForwardTrace* trace = nullptr;
    std::string trace_prefix;  // "layers.3." while in layer 3
    // Verification: after each row, GDN/PLE states are copied into (*snapshots)[row].
    std::vector<RowSnapshot>* snapshots = nullptr;
    int64_t layer_index = 0;  // index into RowSnapshot vectors
    // Routing trace (engine/experts/routing_trace.h format), or null; `trace_step` numbers calls.
    std::ostream* routing_trace = nullptr;
    int64_t trace_step = 0;

    float eps() const { return static_cast<float>(config->rms_norm_eps); }
    void record(const char* name, const float* data, int64_t n) const {
        if (trace != nullptr) trace->record(trace_prefix + name, data, n);
    }
};

// Hyper-connection mix (§3.3): m [T, H] and, when the weights have an inject matrix, w [T, C].
void hyper_connection_mix(const HyperConnectionWeights& weights, const float* x, int64_t n_rows,
                          const LayerContext& ctx, float* mix, float* inject);
// x[t, s·H + d] += w[t, s] · y[t, d]
void hyper_connection_combine(float* x, const float* inject, const float* y, int64_t n_rows,
                              int64_t n_streams, int64_t hidden);

// PLE (§3.4): X += u for the rows' n-gram ids ([T, NH] global table rows).
void ple_forward(const PleWeights& weights, PleState& state, std::span<const int64_t> ngram_ids,
                 float* x, int64_t n_rows, const LayerContext& ctx);

// Gated DeltaNet (§3.5): y [T, H] from m [T, H].
void gated_deltanet_forward(const GatedDeltaNetWeights& weights, GatedDeltaNetState& state,
                            const float* mix, int64_t n_rows, float* y, const LayerContext& ctx);

// QSA (§3.6): appends the rows' keys at positions [first_position, first_position + T) and
// attends each row over its selected set.
void sparse_attention_forward(const SparseAttentionWeights& weights, AttentionCache& cache,
                              const float* mix, int64_t n_rows, int64_t first_position, float* y,
                              const LayerContext& ctx);

// MoE (§3.7): y [T, H]. `next` (may be null) is the next layer's MoE, whose router is applied
// to these rows to predict its experts (lookahead).
void moe_forward(const MoeWeights& weights, const MoeWeights* next, const float* mix,
                 int64_t n_rows, float* y, const LayerContext& ctx);

}  // namespace cherenkov::engine
