// `--check`: runs a backend and the CPU reference side by side on shadow states and reports, per
// call, how far the backend's logits are from the reference's (stderr, and totals in stats()).
// Slow by design: for finding where a backend diverges, never for speed.
#pragma once

#include <memory>

#include "engine/model/model_backend.h"

namespace cherenkov::engine {

// `primary` answers every call; `reference` (the CPU Model) runs the same calls on its own state.
// Both must outlive the result.
std::unique_ptr<ModelBackend> make_checked_backend(ModelBackend& primary, ModelBackend& reference);

}  // namespace cherenkov::engine
