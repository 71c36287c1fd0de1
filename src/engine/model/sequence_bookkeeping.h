// Host-side steps every backend takes around a forward call, shared so the CPU and CUDA models
// cannot drift apart: the n-gram ids of each PLE layer for a call's tokens, and the bookkeeping
// of commit() (token history, n-gram context, pending MTP residuals, position).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model_weights.h"
#include "engine/model/sequence_state.h"

namespace cherenkov::engine {

// ids[l] = [T, NH] global table rows of PLE layer l (empty for other layers), all from the
// context before this call; returns the context after it.
std::vector<int64_t> layer_ngram_ids(const ModelWeights& weights, const SequenceState& state,
                                     std::span<const int32_t> tokens,
                                     std::vector<std::vector<int64_t>>& ids);

// Throws InvalidInput naming the index for a token id outside [0, V).
void check_token_ids(const model_data::qwen4_exp::Config& c, std::span<const int32_t> tokens);

// The tokens of an MTP catch-up (§6.5 step 1): row p = mtp_length .. position-1 takes the token
// at p+1, the last row `next_token`. Throws Internal unless the pending residuals are exactly those
// rows', InvalidInput for a bad token.
std::vector<int32_t> mtp_catch_up_tokens(const model_data::qwen4_exp::Config& c,
                                         const SequenceState& state, int32_t next_token);

// Throws Internal unless the last forward call ran with snapshot_rows and has >= n_rows rows.
void check_commit(const SequenceState& state, int64_t n_rows);

// After the caches were rolled back to `keep` tokens: history, n-gram context, the count of
// pending residuals and position follow (the backend then drops the residual rows past it).
void commit_bookkeeping(const model_data::qwen4_exp::Config& c, SequenceState& state, int64_t keep);

}  // namespace cherenkov::engine
