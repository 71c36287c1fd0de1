#include "engine/generate/sequence_switcher.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace cherenkov::engine {

SequenceSwitcher::SequenceSwitcher(ModelBackend& model, int64_t max_ctx, int max_sets)
    : model_(model), max_ctx_(max_ctx), max_sets_(std::max(max_sets, 1)) {
    fresh_ = model_.new_sequence(max_ctx_);
    shares_ = static_cast<bool>(fresh_.backend);
    if (shares_) {
        spare_.push_back(std::move(fresh_.backend));
        sets_ = 1;
    }
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

bool SequenceSwitcher::try_activate(SequenceState& state, const ParkedCaches& parked) {
    if (!shares_ || state.backend) return true;
    if (spare_.empty() && sets_ < max_sets_) {
        // Another set while the device has room; once an allocation fails, switching takes over.
        try {
            spare_.push_back(std::move(model_.new_sequence(max_ctx_).backend));
            ++sets_;
        } catch (const Error& e) {
            log_info("engine", "no room for another set of sequence caches (" +
                                   std::to_string(sets_) + " made): " + e.what());
            max_sets_ = sets_;
        }
    }
    if (spare_.empty()) return false;
    BackendStateHandle caches = std::move(spare_.back());
    spare_.pop_back();
    try {
        if (parked.fresh) {
            caches.get()->reset();
        } else {
            caches.get()->restore(parked.bytes);
        }
    } catch (...) {
        spare_.push_back(std::move(caches));
        throw;
    }
    state.backend = std::move(caches);
    return true;
}

void SequenceSwitcher::activate(SequenceState& state, const ParkedCaches& parked) {
    CHERENKOV_ASSERT(try_activate(state, parked), "activate() while every set of caches is held");
}

void SequenceSwitcher::park(SequenceState& state, ParkedCaches& parked) {
    if (!shares_ || !state.backend) return;
    state.backend.get()->save(parked.bytes);
    parked.fresh = false;
    spare_.push_back(std::move(state.backend));
    state.backend = BackendStateHandle();
}

void SequenceSwitcher::release(SequenceState& state) {
    if (!shares_ || !state.backend) return;
    spare_.push_back(std::move(state.backend));
    state.backend = BackendStateHandle();
}

}  // namespace cherenkov::engine
