// A sequence state copied into host RAM (docs/qwen4_exp.md §5.3; seed "Prefix cache": checkpoints
// contain attention, recurrent, convolution, PLE, token and MTP state). On the CPU the host
// fields of a SequenceState are the whole state; on CUDA they are the bookkeeping (position,
// tokens, n-gram context, MTP length, pending residuals) and BackendState::save() holds the
// device caches' valid rows. A checkpoint is both, so one code path serves both backends, and
// restoring it into a state of the same model gives exactly the state it was taken from: the
// next call computes what it would have computed without the round trip, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/sequence_state.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {

struct StateCheckpoint {
    // The host fields (backend null; no verification snapshots), vectors sized to their contents.
    SequenceState host;
    // BackendState::save() of the caches the state held (empty for a backend without any).
    std::vector<std::byte> device;

    int64_t position() const { return host.position; }
    const std::vector<int32_t>& tokens() const { return host.tokens; }
    // Host RAM held.
    uint64_t bytes() const;
};

// Copies `state` between steps (after commit(): verification snapshots are not kept). A state
// whose caches live on a device must hold them (be active, sequence_switcher.h).
StateCheckpoint save_checkpoint(const SequenceState& state);

// Makes `target` the checkpoint's state. `target` is a fresh state of the model the checkpoint
// came from (new_sequence, or an active one on CUDA, for the same capacity); its reserved
// capacity is kept, so a restored sequence allocates no more than a fresh one as it grows.
// Throws Corrupt when the checkpoint's shape is not the target's.
void restore_checkpoint(const StateCheckpoint& checkpoint, SequenceState& target);

// Whether `state`'s MTP head can continue from it (§6.4, §6.5): the rows the head has not
// caught up yet (mtp_length .. position-1) all have their trunk residuals, and no MTP row was
// computed with a token the state has not processed (the following-token dependency: row p takes
// the token at p+1, so valid rows must end below position). A state prefilled without
// keep_residuals (by a request that did not speculate) fails this, and can serve only requests
// that do not speculate.
bool mtp_state_complete(const SequenceState& state, const model_data::qwen4_exp::Config& config);

}  // namespace cherenkov::engine
