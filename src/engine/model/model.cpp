#include "engine/model/model.h"

#include <memory>

#include "engine/model/cpu_backend.h"

namespace cherenkov::engine {

Model::Model(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool)
    : ComposedModel(weights, experts, std::make_unique<CpuBackendOps>(weights, experts, pool)) {}

}  // namespace cherenkov::engine
