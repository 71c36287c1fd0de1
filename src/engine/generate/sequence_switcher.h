// Many sequences, few sets of backend caches (seed "Serving architecture": switching requests
// copies sequence state to and from host memory; weights, expert slots and scratch stay shared).
// The CUDA backend keeps a sequence's caches in device memory sized for the server's context.
// The switcher owns up to `max_sets` such sets (made as they are first needed, while the device
// has room): a running sequence holds one, and when none is free the caller parks a sequence
// (its host copy: BackendState::save) to free one. A device allocation keeps its address, so the
// backend's captured graphs stay valid across switches. A backend with host caches only (the
// CPU) needs no switching: each sequence owns its vectors, and these calls do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/model_backend.h"
#include "engine/model/sequence_state.h"

namespace cherenkov::engine {

// A suspended sequence's copy of the backend caches (empty: none yet, a fresh sequence).
struct ParkedCaches {
    std::vector<std::byte> bytes;
    bool fresh = true;
};

class SequenceSwitcher {
public:
    // Makes the first set of caches, for contexts of up to `max_ctx` tokens; up to `max_sets`
    // are made as they are needed.
    SequenceSwitcher(ModelBackend& model, int64_t max_ctx, int max_sets = 1);

    // A fresh state for a context of `max_ctx` tokens (at most the switcher's). With shared
    // caches it holds none (parked, fresh); otherwise it is the model's new_sequence().
    SequenceState new_state(int64_t max_ctx) const;

    // Gives `state` a free set of caches (restored from `parked`, or reset for a fresh sequence),
    // making a new set while fewer than max_sets exist and the backend can allocate it. Returns
    // false when no set is free: park a sequence first. True at once when `state` holds one.
    bool try_activate(SequenceState& state, const ParkedCaches& parked);
    // try_activate() where a set must be free (a caller that parked the holder first).
    void activate(SequenceState& state, const ParkedCaches& parked);
    // Copies `state`'s caches into `parked` and takes them back for the next activate(). Does
    // nothing when `state` does not hold them.
    void park(SequenceState& state, ParkedCaches& parked);

    // Takes the caches back from a finished sequence without copying them.
    void release(SequenceState& state);
    // Sets of caches made so far.
    int sets() const { return sets_; }

    // Whether the backend keeps caches outside the host state (so switching copies them).
    bool shares_caches() const { return shares_; }

private:
    ModelBackend& model_;
    int64_t max_ctx_;
    int max_sets_;
    int sets_ = 0;
    bool shares_ = false;
    SequenceState fresh_;                    // host fields of a fresh sequence (no caches)
    std::vector<BackendStateHandle> spare_;  // sets no sequence holds
};

}  // namespace cherenkov::engine
