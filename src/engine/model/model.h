// The qwen4_exp forward pass on the CPU (docs/qwen4_exp.md §3, §5, §6) over a packed store's
// weights, with routed experts from an ExpertSource. A Model is stateless between calls: every
// sequence's caches live in a SequenceState the caller owns, so several sequences (or saved
// checkpoints of one) can share one Model. Not thread-safe: one call at a time per Model.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <vector>

#include "engine/model/forward_trace.h"
#include "engine/model/model_backend.h"
#include "engine/model/model_weights.h"
#include "engine/model/ops.h"
#include "engine/model/sequence_state.h"
#include "engine/model/token_selector.h"

namespace cherenkov::engine {

class ExpertSource;
class ThreadPool;

class Model final : public ModelBackend {
public:
    Model(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool);

    const char* name() const override { return "cpu"; }
    const model_data::qwen4_exp::Config& config() const override { return weights_.config; }
    const ModelWeights& weights() const { return weights_; }
    bool has_mtp() const override { return weights_.mtp.has_value(); }

    SequenceState new_sequence(int64_t max_ctx) const override;

    // Writes every call's routing to `out` (null: off) in the routing-trace text format, one
    // step per forward or MTP call, for replaying the expert cache on real routing.
    void set_routing_trace(std::ostream* out) override { routing_trace_ = out; }

    // Runs the trunk on `tokens` at positions [state.position, +T). Throws InvalidInput for a
    // token id outside [0, V) before touching the state.
    ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                          const ForwardOptions& options) override;

    // Keeps the first n_rows rows of the last forward call (which ran with snapshot_rows) and
    // rolls everything else back (§5.2).
    void commit(SequenceState& state, int64_t n_rows) override;

    // MTP catch-up (§6.5 step 1): rows p = mtp_length .. position-1 with h = R_p and the token
    // at p+1 (`next_token` for the last row); consumes pending_residuals, sets mtp_length.
    MtpResult mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                           ForwardTrace* trace = nullptr,
                           const TokenSelection* select = nullptr) override;
    // A chained draft (§6.5 step 2): one row at `position` with h = R' of the previous MTP row
    // and its draft token; `step` selects the MTP layer (step mod n_layers).
    MtpResult mtp_chain(SequenceState& state, std::span<const float> previous_residual,
                        int32_t token, int64_t position, int64_t step,
                        const TokenSelection* select = nullptr) override;

private:
    MtpResult mtp_rows(SequenceState& state, const float* residuals,
                       std::span<const int32_t> tokens, int64_t first_position, int64_t step,
                       bool all_logits, ForwardTrace* trace, const TokenSelection* select);
    // The selection (when asked) over host logits [n_rows, V] with the shared definition: fills
    // tokens and drops the logits unless select->keep_logits.
    void select_tokens(const TokenSelection* select, int64_t n_rows, std::vector<float>& logits,
                       std::vector<int32_t>& tokens);
    void head(const HyperConnectionWeights& mixer, const Linear& lm_head, const float* x,
              int64_t n_rows, float* logits, ForwardTrace* trace, const char* trace_name);
    void check_tokens(std::span<const int32_t> tokens) const;

    const ModelWeights& weights_;
    ExpertSource& experts_;
    ThreadPool& pool_;
    Rope rope_;
    std::ostream* routing_trace_ = nullptr;
    int64_t trace_step_ = 0;
    TokenSelector selector_;  // scratch of select_tokens
};

}  // namespace cherenkov::engine
