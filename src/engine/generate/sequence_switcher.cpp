#include "engine/generate/sequence_switcher.h"

#include "base/error.h"

namespace cherenkov::engine {

SequenceSwitcher::SequenceSwitcher(ModelBackend& model, int64_t max_ctx)
    : model_(model), max_ctx_(max_ctx) {
    fresh_ = model_.new_sequence(max_ctx_);
    shares_ = static_cast<bool>(fresh_.backend);
    spare_ = std::move(fresh_.backend);
    fresh_.backend = BackendStateHandle();
}

SequenceState SequenceSwitcher::new_state(int64_t max_ctx) const {
    if (max_ctx > max_ctx_) {
        throw_invalid("a context of " + std::to_string(max_ctx) + " tokens is more than the " +
                      std::to_string(max_ctx_) + " the server was started with");
    }
    if (!shares_) return model_.new_sequence(max_ctx);
    return fresh_;
}

void SequenceSwitcher::activate(SequenceState& state, const ParkedCaches& parked) {
    if (!shares_ || state.backend) return;
    CHERENKOV_ASSERT(static_cast<bool>(spare_),
                     "activate() while another sequence holds the caches");
    if (parked.fresh) {
        spare_.get()->reset();
    } else {
        spare_.get()->restore(parked.bytes);
    }
    state.backend = std::move(spare_);
    spare_ = BackendStateHandle();
}

void SequenceSwitcher::park(SequenceState& state, ParkedCaches& parked) {
    if (!shares_ || !state.backend) return;
    state.backend.get()->save(parked.bytes);
    parked.fresh = false;
    spare_ = std::move(state.backend);
    state.backend = BackendStateHandle();
}

void SequenceSwitcher::release(SequenceState& state) {
    if (!shares_ || !state.backend) return;
    spare_ = std::move(state.backend);
    state.backend = BackendStateHandle();
}

}  // namespace cherenkov::engine
