// What one sequence's state costs, from the config alone (before any weights load): the figure
// the CLI and the server check a requested context against (engine/generate/context_budget.h),
// and what the adaptive pool must leave free for it (seed: "Context uses about 22.5 KB per token").
#pragma once

#include <cstdint>

#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {

// Bytes of a SequenceState for a context of `max_ctx` tokens with `n_mtp_layers` MTP layers, as
// make_sequence_state allocates it (engine/model/sequence_state.h): the GDN and PLE states, the
// attention caches (keys, values, indexer keys and block keys) of every QSA and MTP layer at
// max_ctx rows, and the token history; plus `snapshot_rows` rows of verification snapshots of
// the non-truncatable states (a decode step verifies 1 + drafts rows). The CUDA backend's
// device caches (DeviceSequence) hold the same floats for max_ctx + 8 rows and no token history.
uint64_t sequence_state_bytes(const model_data::qwen4_exp::Config& config, int64_t max_ctx,
                              int64_t n_mtp_layers, int64_t snapshot_rows = 0);

}  // namespace cherenkov::engine
