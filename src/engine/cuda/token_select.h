// Token selection on the GPU: the TokenSelector definition of engine/model/token_selector.h
// (greedy argmax; temperature, top-k, top-p and the draw with a host-drawn u) over device logits,
// so a decode step copies back token ids instead of [rows, V] logits. Plain C++ API: device
// pointers and a cudaStream_t passed as void* (nullptr: the legacy default stream). Built from
// token_select.cu with CUDA, or from unavailable.cpp without it, where the call
// throws "built without CUDA".
#pragma once

#include <cstdint>

#include "engine/model/token_selector.h"

namespace cherenkov::engine::cuda {

// tokens[r] = TokenSelector::select(logits[r], choices[r]) for r < n_rows. Greedy rows are one
// key-max reduction per row (over many blocks with scratch, one block without: ~4× slower at
// vocab 151936) and give exactly the host argmax. Sampled rows find the top-k cut,
// the top-p cut and the draw as radix selects over selection_key with integer weights (exact
// sums, so no summation order enters), on the candidates of non-zero weight that many blocks per
// row first gather, the selects again spread over several blocks per row (up to 32, meeting at a
// barrier after each radix pass); they equal the host's pick whenever both sides' float weights are
// equal, which fails only where the double exp of a scaled logit lies within a double ulp of a
// float rounding point (token_selector.h). logits: device float [n_rows, vocab], 1 ≤ vocab < 2^31;
// choices: device TokenChoice [n_rows]; scratch: device uint64 [n_rows,
// token_select_scratch_words(vocab)] (each row's largest key, candidate count, the counters and
// digit histograms its select blocks share, keys and weights, and room for a select's copy of
// them), or null when every row is greedy (a sampled row then gets token -1); tokens: device int32
// [n_rows]. Asynchronous on `stream`: a 2-D memset and three kernels with scratch (the selects
// in more launches when there are more rows than stay resident at once), one kernel without.
void token_select(const float* logits, int64_t n_rows, int64_t vocab, const TokenChoice* choices,
                  uint64_t* scratch, int32_t* tokens, void* stream);

// Scratch words token_select needs per row when any row is sampled.
constexpr int64_t token_select_scratch_words(int64_t vocab) {
    return 8 + 3 * 512 + 4 * vocab;
}

}  // namespace cherenkov::engine::cuda
