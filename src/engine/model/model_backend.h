// What the generator, the CLI and the server need from a forward-pass implementation, whatever it
// runs on: the CPU Model (engine/model/model.h) or the CUDA model (engine/cuda/cuda_model.h).
// Every backend takes the same SequenceState: host bookkeeping (position, tokens, n-gram context,
// MTP length, pending residuals) lives in its plain fields, and a backend that keeps caches
// elsewhere (device memory) hangs them on SequenceState::backend. A state made by one backend is
// only valid with that backend.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "engine/model/backend_stats.h"
#include "engine/model/forward_trace.h"
#include "engine/model/gpu_stage_totals.h"
#include "engine/model/sequence_state.h"
#include "engine/model/token_selector.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {

struct ForwardOptions {
    bool all_logits = false;      // logits for every row; otherwise only the last row
    bool keep_residuals = false;  // append the last layer's residuals to pending_residuals (MTP)
    bool snapshot_rows = false;   // per-row GDN/PLE snapshots, for commit() after verification
    ForwardTrace* trace = nullptr;
    // Token ids instead of logits (null: logits only): one TokenChoice per logit row, picked where
    // the logits are (on the device for CUDA), so only the ids cross to the host.
    const TokenSelection* select = nullptr;
};

struct ForwardResult {
    int64_t n_logit_rows = 0;
    std::vector<float> logits;    // [n_logit_rows, V]; empty with a select without keep_logits
    std::vector<int32_t> tokens;  // [n_logit_rows] with a select, else empty
};

// One MTP call's output: logits of the requested rows. The pre-mixer residual R' of its last row
// (the input of a chained draft) stays with the sequence, where the backend keeps it.
struct MtpResult {
    int64_t n_logit_rows = 0;
    std::vector<float> logits;    // [n_logit_rows, V]; as ForwardResult::logits
    std::vector<int32_t> tokens;  // [n_logit_rows] with a select, else empty
};

class ModelBackend {
public:
    virtual ~ModelBackend() = default;

    virtual const char* name() const = 0;  // "cpu", "cuda"
    virtual const model_data::qwen4_exp::Config& config() const = 0;
    virtual bool has_mtp() const = 0;
    int64_t vocab_size() const { return config().vocab_size; }

    virtual SequenceState new_sequence(int64_t max_ctx) const = 0;

    // Writes every call's routing to `out` (null: off) in the routing-trace text format, one
    // step per forward or MTP call, for replaying the expert cache on real routing.
    virtual void set_routing_trace(std::ostream* out) = 0;

    // Runs the trunk on `tokens` at positions [state.position, +T). Throws InvalidInput for a
    // token id outside [0, V) before touching the state.
    virtual ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                                  const ForwardOptions& options) = 0;

    // Keeps the first n_rows rows of the last forward call (which ran with snapshot_rows) and
    // rolls everything else back (§5.2).
    virtual void commit(SequenceState& state, int64_t n_rows) = 0;

    // MTP catch-up (§6.5 step 1): rows p = mtp_length .. position-1 with h = R_p and the token
    // at p+1 (`next_token` for the last row); consumes pending_residuals, sets mtp_length.
    // `select` as ForwardOptions::select, over the rows all_logits asks for.
    virtual MtpResult mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                                   ForwardTrace* trace = nullptr,
                                   const TokenSelection* select = nullptr) = 0;
    // A chained draft (§6.5 step 2): one row at `position` with h = R' of the last row of the
    // previous MTP call on `state` and that row's draft `token`; `step` selects the MTP layer
    // (step mod n_layers). `select`: one row. Throws Internal without a previous MTP call.
    virtual MtpResult mtp_chain(SequenceState& state, int32_t token, int64_t position, int64_t step,
                                const TokenSelection* select = nullptr) = 0;

    // The most rows one prefill call should be given: prompts are cut into chunks of at most
    // this (seed "Memory and scheduling": actual chunks may be smaller to fit available memory).
    // A backend whose scratch is reserved for a fixed chunk (CUDA: --prefill-quantum rows, fewer
    // when the device cannot hold that beside the expert pool) reports it; the default has no
    // limit. Decode steps (a token and its drafts) are never cut.
    virtual int64_t max_rows_per_call() const { return std::numeric_limits<int64_t>::max(); }

    // The backend's own figures (device memory and pool, --check's comparison); none by default.
    // Serialised by backend_stats_json for memory_stats.
    virtual BackendStats backend_stats() const { return {}; }

    // GPU stage coverage of the decode and MTP calls so far (a backend without GPU timestamps:
    // unavailable). Reads finished timestamps only; never waits for the device.
    virtual GpuStageTotals gpu_stage_totals() const { return {}; }
    // The same for prefill calls (more rows than a decode step), each a window from its input
    // upload to its head, the host's gathering of n-gram rows a pause in it.
    virtual GpuStageTotals prefill_gpu_stage_totals() const { return {}; }
};

}  // namespace cherenkov::engine
