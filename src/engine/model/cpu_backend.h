// The CPU backend's ops (backend_ops.h) over the layer functions of layers.h: host arrays, the
// caches in SequenceState's plain fields, routed experts computed as their records arrive.
#pragma once

#include <memory>

#include "engine/model/backend_ops.h"
#include "engine/model/model_weights.h"
#include "engine/model/ops.h"
#include "engine/model/token_selector.h"

namespace cherenkov::engine {

class ExpertSource;
class ThreadPool;

class CpuBackendOps final : public BackendOps {
public:
    CpuBackendOps(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool,
                  ActivationPrecision activations);

    const char* name() const override { return "cpu"; }
    SequenceState new_sequence(int64_t max_ctx) const override;
    std::unique_ptr<ForwardPass> begin_pass(SequenceState& state, const PassSpec& spec) override;
    void rollback_layer(SequenceState& state, size_t layer, int64_t row, int64_t keep) override;
    void truncate_mtp_attention(SequenceState& state, size_t layer, int64_t n) override;
    void truncate_residuals(SequenceState& state, int64_t rows) override;
    void clear_residuals(SequenceState& state) override;

private:
    friend class CpuPass;
    const ModelWeights& weights_;
    ExpertSource& experts_;
    ThreadPool& pool_;
    ActivationPrecision activations_;
    Rope rope_;
    TokenSelector selector_;  // scratch of the head's token selection
};

}  // namespace cherenkov::engine
