// The ops a backend supplies to the one composition of the qwen4_exp model (composed_model.h,
// decoder_layer.cpp): the model's structure (embedding, decoder layers, MoE policy, MTP input,
// heads, commit) is written once in engine/model; a backend runs each op on its own memory and
// kernels (CPU: cpu_backend.h; CUDA: engine/cuda/cuda_backend.cu).
//
// A forward or MTP call is one ForwardPass. Arrays are float pointers in the backend's memory
// (host for the CPU, device for CUDA), row-major [T, width], T the pass's rows. Ops are queued in
// the order the composition calls them; a backend may run them later (a GPU stream) but must give
// the bits of running them in that order. Two kinds of marks let a backend batch work:
//   - capture regions (layer_region, step): every op inside is queued without the host waiting
//     on results, so a backend may record the region once and replay it (CUDA graphs);
//   - host decision points (moe_path, moe_finish): where the host needs data the ops produced,
//     or decides how the next ops run. They sit outside capture regions.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model/backend_stats.h"
#include "engine/model/forward_trace.h"
#include "engine/model/gpu_stage_totals.h"
#include "engine/model/sequence_state.h"
#include "engine/model/token_selector.h"

namespace cherenkov::engine {

// A decoder layer: one of the trunk's, or one of the MTP head's.
struct LayerRef {
    bool mtp = false;
    size_t index = 0;
};

// Which hyper-connection mixer an op uses: the current layer's two, or a head's.
enum class Mixer { Attention, Mlp, Final, MtpHead };
// The MTP input's weights (docs/qwen4_exp.md §6.3).
enum class MtpNorm { Embedding, Hidden };
enum class MtpLinear { FcEmbedding, FcHidden };
enum class Head { Trunk, Mtp };

// How a layer's MoE block runs this pass (decided at a host decision point, before the layer's
// ops are queued): Device has the whole block inside the layer's capture region; Host routes
// inside it (moe_route queues the router and the read-back of its choices) and computes the
// experts after it (moe_finish waits for the routing, fetches records, combines).
enum class MoePath { Host, Device };

// What one call is: its rows, tokens and position, and what the caller asked for.
struct PassSpec {
    std::span<const int32_t> tokens;  // one per row
    int64_t first_position = 0;
    ForwardTrace* trace = nullptr;
    bool snapshot_rows = false;  // per-row GDN/PLE snapshots of trunk layers (commit)
    // -1: the trunk's layers; else the MTP layer the call runs.
    int64_t mtp_layer = -1;
    // Trunk calls with PLE layers: each PLE layer's n-gram ids [T·heads] (empty elsewhere).
    const std::vector<std::vector<int64_t>>* ngram_ids = nullptr;
    // MTP calls: h is the sequence's chain residual (a chained draft), else its pending
    // residuals (a catch-up).
    bool chain = false;
    int64_t logit_rows = 0;                  // the last logit_rows rows get logits
    const TokenSelection* select = nullptr;  // over the logit rows, or null
    std::ostream* routing_trace = nullptr;   // the routing-trace text output, or null
    int64_t trace_step = 0;                  // the call's number in it

    int64_t n_rows() const { return static_cast<int64_t>(tokens.size()); }
};

// One forward or MTP call on a backend (see the file comment).
class ForwardPass {
public:
    virtual ~ForwardPass() = default;

    // ---- arrays and trace ----
    // Arrays that live until the pass ends, or until the current layer ends.
    virtual float* call_array(int64_t n) = 0;
    virtual float* layer_array(int64_t n) = 0;
    // Trace names are prefix + name; a backend's own records inside an op use the same prefix.
    virtual void set_trace_prefix(std::string prefix) = 0;
    virtual void record(const char* name, const float* data, int64_t n) = 0;

    // ---- inputs ----
    // x [T, C·H]: the tokens' embedding rows replicated over the C streams; first [T, H]: the rows.
    virtual void embed(float* x, float* first) = 0;
    // e [T, H]: the MTP head's embedding rows of the tokens.
    virtual void mtp_embed(float* e) = 0;
    // h [T, C·H]: the call's residual rows (PassSpec::chain: the chain residual, else the pending
    // residuals), from where the backend keeps them.
    virtual void residual_input(float* h) = 0;
    virtual void mtp_norm(MtpNorm which, float* rows, int64_t n_rows, int64_t width) = 0;
    virtual void mtp_linear(MtpLinear which, const float* x, int64_t n_rows, float* y) = 0;
    // x[t, s·H + d] += f[t, d]
    virtual void add_per_stream(float* x, const float* f) = 0;

    // ---- a decoder layer ----
    // Starts `layer`: its arrays, its snapshots, its trace prefix.
    virtual void begin_layer(LayerRef layer, std::string trace_prefix) = 0;
    virtual void end_layer() = 0;
    // Ops of the current layer over the pass's rows.
    virtual void ple(float* x) = 0;
    // mix [n, H] and, when inject is given, inject [n, C] from x [n, C·H].
    virtual void mix(Mixer which, const float* x, int64_t n_rows, float* mix, float* inject) = 0;
    virtual void token_mixer(const float* mix, float* y) = 0;  // GDN or QSA
    // x[t, s·H + d] += inject[t, s] · y[t, d]
    virtual void combine(float* x, const float* inject, const float* y) = 0;
    // A host decision point: how this layer's MoE runs (MoePath).
    virtual MoePath moe_path() = 0;
    // y = MoE(mix), then x += inject · y (the MLP side's combine). `next`: the following trunk
    // layer, whose router the Host path applies to these rows to predict its experts.
    virtual void moe_on_device(const float* mix, float* y, float* x, const float* inject) = 0;
    virtual void moe_route(const float* mix, const LayerRef* next) = 0;
    virtual void moe_finish(const float* mix, const LayerRef* next, float* y, float* x,
                            const float* inject) = 0;
    // A capture region of the current layer's ops up to the MoE's host decision (see above);
    // `x` is the residual the region updates.
    virtual void layer_region(const float* x, const std::function<void()>& body) = 0;

    // ---- the whole call ----
    // A capture region of the whole call (embedding to token selection), when the backend can
    // run it without host decisions; otherwise runs body as it is.
    virtual void step(const std::function<void()>& body) = 0;
    // Queues the head: logits [T', V] of mix [T', H] through the head's lm_head, and the token
    // selection of PassSpec::select.
    virtual void head(Head which, const float* mix, int64_t n_rows) = 0;
    // After the step: the head's logits (without a selection, or with keep_logits) and tokens.
    virtual void collect(std::vector<float>& logits, std::vector<int32_t>& tokens) = 0;
    // Appends x's rows [T, C·H] to the sequence's pending residuals (MTP), where the backend
    // keeps them.
    virtual void keep_residuals(const float* x) = 0;
    // Keeps x's last row [C·H] as the sequence's chain residual (the next chained draft's h),
    // where the backend keeps it.
    virtual void keep_chain_residual(const float* x) = 0;
};

// A backend: its passes, and the state ops outside them.
class BackendOps {
public:
    virtual ~BackendOps() = default;
    virtual const char* name() const = 0;
    virtual SequenceState new_sequence(int64_t max_ctx) const = 0;
    // Throws InvalidInput when `state` cannot take n_rows more rows.
    virtual void check_room(const SequenceState& /*state*/, int64_t /*n_rows*/) const {}
    virtual std::unique_ptr<ForwardPass> begin_pass(SequenceState& state, const PassSpec& spec) = 0;
    // After a pass that returned normally (a backend may grow its scratch here).
    virtual void after_pass() {}
    // Rollback of trunk layer `layer` to its snapshot of `row` (GDN, PLE) and of its attention
    // cache to `keep` tokens.
    virtual void rollback_layer(SequenceState& state, size_t layer, int64_t row, int64_t keep) = 0;
    // Drops MTP layer `layer`'s attention entries at or after `n`.
    virtual void truncate_mtp_attention(SequenceState& state, size_t layer, int64_t n) = 0;
    // The pending residuals' rows past `rows` are dropped (commit).
    virtual void truncate_residuals(SequenceState& state, int64_t rows) = 0;
    virtual void clear_residuals(SequenceState& state) = 0;

    // As ModelBackend::max_rows_per_call: no limit unless the backend's scratch sets one.
    virtual int64_t max_rows_per_call() const { return std::numeric_limits<int64_t>::max(); }
    virtual BackendStats backend_stats() const { return {}; }
    virtual GpuStageTotals gpu_stage_totals() const { return {}; }
    virtual GpuStageTotals prefill_gpu_stage_totals() const { return {}; }
};

}  // namespace cherenkov::engine
