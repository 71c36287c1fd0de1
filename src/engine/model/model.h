// The qwen4_exp model on the CPU (docs/qwen4_exp.md §3, §5, §6) over a packed store's weights,
// with routed experts from an ExpertSource: the one composition (composed_model.h) with the CPU
// backend's ops (cpu_backend.h). Stateless between calls: every sequence's caches live in a
// SequenceState the caller owns, so several sequences (or saved checkpoints of one) can share
// one Model. Not thread-safe: one call at a time per Model.
#pragma once

#include "engine/cpu/matmul.h"
#include "engine/model/composed_model.h"

namespace cherenkov::engine {

class ExpertSource;
class ThreadPool;

class Model final : public ComposedModel {
public:
    // `weights`, `experts` and `pool` must outlive the model. `activations`: how activations
    // meet quantized weights in the matmuls (engine/cpu/matmul.h); F32 is the reference.
    Model(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool,
          ActivationPrecision activations = ActivationPrecision::F32);
};

}  // namespace cherenkov::engine
