// Placeholder until the sampler lands: greedy selection only.
#include "engine/generate/sampler.h"

namespace cherenkov::engine {

int32_t argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    }
    return best;
}

}  // namespace cherenkov::engine
