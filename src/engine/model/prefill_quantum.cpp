#include "engine/model/prefill_quantum.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {

PrefillQuantum PrefillQuantum::of(int64_t rows, std::string_view source) {
    if (rows >= 1 && rows <= kMaxPrefillQuantum) return PrefillQuantum(rows);
    throw_invalid(std::string(source) + " must be between 1 and " +
                  std::to_string(kMaxPrefillQuantum) + " (rows per prefill call), got " +
                  std::to_string(rows));
}

uint64_t prefill_scratch_row_bytes(const model_data::qwen4_exp::Config& c) {
    // A row's logits [V] (all of a chunk's rows with all_logits: `logits`, `perplexity`), once:
    // the head's output is alive only at the end of the call. Then the widest of the per-row
    // tensors of a layer: the GDN conv input and output [2·conv_dim], attention queries and gates
    // [2·heads·head_dim], hyper-connection streams and their mixes [4·C·H], router logits and
    // probabilities [2·E], and a row's routed-expert work (k outputs of [H] plus gate and up
    // [2·I]). Eight of those cover every temporary alive at once, generously: this is a
    // reservation, and an arena that outgrows it still works. (Eight logit rows as well made the
    // reservation 7.9 MB a row with a 248k vocabulary, 4 GB for a 512-row chunk.)
    const int64_t widest = std::max<int64_t>(
        {c.conv_dim * 2, c.num_attention_heads * c.head_dim * 2, c.hc_width() * 4,
         c.num_experts * 2, c.num_experts_per_tok * c.hidden_size + c.moe_intermediate_size * 2});
    return static_cast<uint64_t>(c.vocab_size + widest * 8) * sizeof(float);
}

int64_t prefill_chunk_rows(const ModelBackend& model, PrefillQuantum quantum) {
    const int64_t limit = model.max_rows_per_call();
    const bool reserved = limit != std::numeric_limits<int64_t>::max();
    const int64_t rows = quantum.automatic() && reserved ? limit : std::min(quantum.rows(), limit);
    return std::max<int64_t>(rows, 1);
}

ForwardResult forward_in_chunks(ModelBackend& model, SequenceState& state,
                                std::span<const int32_t> tokens, const ForwardOptions& options,
                                int64_t chunk_rows, int64_t* n_calls) {
    CHERENKOV_ASSERT(chunk_rows >= 1, "a prefill chunk has at least one row");
    const auto chunk = static_cast<size_t>(chunk_rows);
    CHERENKOV_ASSERT(!options.snapshot_rows || tokens.size() <= chunk,
                     "row snapshots are for one verification call, never a chunked prefill");
    ForwardResult result;
    int64_t calls = 0;
    for (size_t at = 0; at < tokens.size(); at += chunk) {
        const size_t n = std::min(tokens.size() - at, chunk);
        ForwardResult part = model.forward(state, tokens.subspan(at, n), options);
        ++calls;
        if (!options.all_logits) {
            result = std::move(part);
            continue;
        }
        result.n_logit_rows += part.n_logit_rows;
        result.logits.insert(result.logits.end(), part.logits.begin(), part.logits.end());
    }
    if (n_calls != nullptr) *n_calls = calls;
    return result;
}

}  // namespace cherenkov::engine
