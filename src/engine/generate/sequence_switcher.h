// Many sequences, one set of backend caches (seed "Serving architecture": switching requests
// copies sequence state to and from host memory; weights, expert slots and scratch stay shared).
// The CUDA backend keeps a sequence's caches in device memory sized for the server's context;
// the worker gives them to the sequence that runs, and a suspended sequence keeps a host copy
// (BackendState::save). The device allocation keeps its address, so the backend's captured
// graphs stay valid across switches. A backend with host caches only (the CPU) needs no
// switching: each sequence owns its vectors, and these calls do nothing.
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
    // Makes the one set of caches, for contexts of up to `max_ctx` tokens.
    SequenceSwitcher(ModelBackend& model, int64_t max_ctx);

    // A fresh state for a context of `max_ctx` tokens (at most the switcher's). With shared
    // caches it holds none (parked, fresh); otherwise it is the model's new_sequence().
    SequenceState new_state(int64_t max_ctx) const;

    // Gives `state` the caches (restored from `parked`, or reset for a fresh sequence), taking
    // them from the sequence that holds them, which must have been parked first. Does nothing
    // when `state` holds them already.
    void activate(SequenceState& state, const ParkedCaches& parked);
    // Copies `state`'s caches into `parked` and takes them back for the next activate(). Does
    // nothing when `state` does not hold them.
    void park(SequenceState& state, ParkedCaches& parked);

    // Takes the caches back from a finished sequence without copying them.
    void release(SequenceState& state);

    // Whether the backend keeps caches outside the host state (so switching copies them).
    bool shares_caches() const { return shares_; }

private:
    ModelBackend& model_;
    int64_t max_ctx_;
    bool shares_ = false;
    SequenceState fresh_;       // host fields of a fresh sequence (no backend caches)
    BackendStateHandle spare_;  // the caches while no sequence holds them
};

}  // namespace cherenkov::engine
