// The prefill quantum (seed "Memory and scheduling"): the largest number of prompt rows one
// forward call takes, and the scratch reserved for it. Larger chunks reuse each fetched expert
// across more tokens but leave less memory for the expert pool. Every caller that cuts a prompt
// into calls (the generator, `logits`, `perplexity`) cuts it here, to at most
// min(quantum, ModelBackend::max_rows_per_call()) rows.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/model/model_backend.h"

namespace cherenkov::engine {

// 512, not the seed's 128: that default kept expert-pool space on a 32 GB unified-memory Mac,
// where weights, pool and scratch share one memory. Our scratch per row is small against our
// memories (prefill_scratch_row_bytes is about 2.3 MB with Flash's 248k vocabulary, so 1.2 GB
// for 512 rows, beside 80-141 GB GPUs or the host RAM of a CPU machine), and a resident prefill
// of 512 tokens runs 20-30% faster in one call than in two of 256 (H200, docs/cuda-backend.md:
// half the per-call work, and each expert's weights read once for twice the tokens). Larger
// values speed up prefill further when memory allows, above all when experts stream from disk,
// where every chunk reads most of the expert table.
inline constexpr int64_t kDefaultPrefillQuantum = 512;
// Past this the scratch (tens of GB with a large vocabulary) outgrows any device we target.
inline constexpr int64_t kMaxPrefillQuantum = 65536;
// What a quantum nobody set grows to when the experts stream (the device pool holds less than the
// table) and the memory the pool leaves holds it: a streamed chunk reads most of the table
// whatever its size, so 4,096-row chunks read it an eighth as often per token as 512-row ones.
inline constexpr int64_t kStreamingPrefillQuantum = 4096;
// What it grows to where the device pool holds the whole table and the device has the memory: a
// 512-row chunk gives each of 512 experts about 10 rows at top-10, so the expert GEMMs read each
// weight for few tokens. A 4,096-token prompt ran 1.27x as fast in 2,048-row chunks as in 512-row
// ones, and 4,096-row chunks added 2% for twice the scratch (H100, docs/cuda-backend.md).
inline constexpr int64_t kResidentPrefillQuantum = 2048;

// The quantum as a value checked where it enters (the CLI flag, the server's configuration file,
// a test) and carried as it is through the load, backend, generation and worker options: making
// one is the only check, so no holder checks it again.
class PrefillQuantum {
public:
    // kDefaultPrefillQuantum rows, automatic: a backend that reserves scratch per chunk may
    // reserve more rows (CUDA: up to kStreamingPrefillQuantum when the experts stream, up to
    // kResidentPrefillQuantum when the device pool holds the whole table), and the
    // chunks are then its reservation (prefill_chunk_rows).
    constexpr PrefillQuantum() = default;

    // `rows` as a quantum. Throws InvalidInput naming `source` (the flag or the configuration
    // field the value came from) unless 1 ≤ rows ≤ kMaxPrefillQuantum: "--prefill-quantum must
    // be between 1 and 65536 (rows per prefill call), got 0".
    static PrefillQuantum of(int64_t rows, std::string_view source = "--prefill-quantum");

    int64_t rows() const { return rows_; }
    // Not set by anyone (the default): the backend may grow the chunk (above).
    bool automatic() const { return automatic_; }
    bool operator==(const PrefillQuantum&) const = default;

private:
    explicit constexpr PrefillQuantum(int64_t rows) : rows_(rows), automatic_(false) {}

    int64_t rows_ = kDefaultPrefillQuantum;
    bool automatic_ = true;
};

// An upper bound of the activation bytes one prefill row keeps alive during a forward call:
// eight float rows of the widest per-row tensor (logits, GDN conv input, attention heads,
// hyper-connection streams, router, a row's routed-expert work). Backends reserve
// rows · this (plus their own fixed slack) for a chunk.
uint64_t prefill_scratch_row_bytes(const model_data::qwen4_exp::Config& config);

// Rows per prefill call for `quantum` on `model`: min(quantum, model.max_rows_per_call()), or for
// an automatic quantum the backend's limit where it sets one (its reservation, which may be
// larger than the quantum's rows).
int64_t prefill_chunk_rows(const ModelBackend& model, PrefillQuantum quantum);

// Runs `tokens` through `model` as consecutive calls of at most `chunk_rows` rows each (the
// state advances as one call would). With options.all_logits the result holds every row's
// logits in order; otherwise the last row's. Traces append across calls. snapshot_rows needs a
// single call (commit() refers to the last call), so it is refused with more rows than a chunk.
// `n_calls`, when given, receives the number of calls made.
ForwardResult forward_in_chunks(ModelBackend& model, SequenceState& state,
                                std::span<const int32_t> tokens, const ForwardOptions& options,
                                int64_t chunk_rows, int64_t* n_calls = nullptr);

}  // namespace cherenkov::engine
