#include "engine/model/model.h"

#include <memory>

#include "engine/model/cpu_backend.h"

namespace cherenkov::engine {

Model::Model(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool,
             ActivationPrecision activations)
    : ComposedModel(weights, experts,
                    std::make_unique<CpuBackendOps>(weights, experts, pool, activations)) {}

}  // namespace cherenkov::engine
