// The PLE n-gram hashing description of docs/qwen4_exp.md §3.4: per-PLE-layer multipliers, head
// vocab sizes (consecutive primes), offsets, table size, and the n-gram ids of new tokens. All
// arithmetic is unsigned 64-bit; the checkpoint buffers it mirrors are int64.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cherenkov::model_data::qwen4_exp {

struct Config;

// Constants of §3.4.
inline constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ULL;
inline constexpr uint64_t kSplitmixM1 = 0xBF58476D1CE4E5B9ULL;
inline constexpr uint64_t kSplitmixM2 = 0x94D049BB133111EBULL;
inline constexpr uint64_t kNgramPrime1 = 10007;

uint64_t splitmix64(uint64_t value);

// Deterministic Miller-Rabin, exact for every 64-bit n.
bool is_prime_u64(uint64_t n);
// Smallest prime ≥ n. Throws InvalidInput when it would not fit in 63 bits.
uint64_t next_prime_at_least(uint64_t n);

// The config fields the hashing reads.
struct NgramHashParams {
    int64_t vocab_size = 0;  // V
    uint64_t seed = 1234;
    int64_t ngram_size = 3;       // N
    int64_t heads_per_ngram = 8;  // hpn
    int64_t vocab_size_base = 20000000;
    int64_t divisible_by = 128;
    int64_t eos_token_id = 0;  // the first eos_token_id

    static NgramHashParams from_config(const Config& config);
};

// One PLE layer's hashing constants. The vectors mirror the checkpoint buffers
// `ple_embedding.{layer_multipliers [N], ngram_heads_vocab_sizes [NH], ngram_heads_offsets [NH]}`.
struct NgramHash {
    NgramHashParams params;
    int64_t ple_layer_index = 0;
    std::vector<int64_t> layer_multipliers;  // [N], m_j
    std::vector<int64_t> head_vocab_sizes;   // [NH], size_h
    std::vector<int64_t> head_offsets;       // [NH], offset_h
    int64_t total_rows = 0;                  // Σ size_h
    int64_t padded_rows = 0;                 // total rounded up to divisible_by

    int64_t n_heads() const { return static_cast<int64_t>(head_vocab_sizes.size()); }
    int64_t context_len() const { return params.ngram_size - 1; }
};

// Computes the constants of one PLE layer (rank `ple_layer_index` in the sorted ple_layer_ids).
// Throws InvalidInput for parameters outside the ranges Config accepts.
NgramHash build_ngram_hash(const NgramHashParams& params, int64_t ple_layer_index);
NgramHash build_ngram_hash(const Config& config, int64_t ple_layer_index);
// Every PLE layer's constants in ple_layer_index order, continuing the prime sequence across
// layers in one pass (empty without PLE).
std::vector<NgramHash> build_all_ngram_hashes(const Config& config);

// The fresh n-gram context: [EOS] · (N-1).
std::vector<int64_t> initial_ngram_context(const NgramHash& hash);

// N-gram ids of `tokens` given `context` (the previous N-1 ids). Writes T·NH ids, token-major
// (ids_out[t·NH + h]), and replaces `context` by the last N-1 entries of context ++ tokens.
// Allocation-free. Throws InvalidInput for a wrong span size or an id outside [0, V).
void ngram_ids_into(const NgramHash& hash, std::span<int64_t> context,
                    std::span<const int64_t> tokens, std::span<int64_t> ids_out);

struct NgramIds {
    std::vector<int64_t> ids;      // [T, NH] row-major
    std::vector<int64_t> context;  // updated context, N-1 ids
};

NgramIds ngram_ids(const NgramHash& hash, std::span<const int64_t> context,
                   std::span<const int64_t> tokens);

// The three hash buffers as found in a checkpoint (empty = absent).
struct HashBuffers {
    std::vector<int64_t> layer_multipliers;
    std::vector<int64_t> head_vocab_sizes;
    std::vector<int64_t> head_offsets;
};

// Compares checkpoint buffers with the computed ones (§2.7). Returns one line per mismatching
// buffer (length or first differing element), each starting with `layer_name`; empty when they
// agree or are absent. The caller logs them and uses the checkpoint values.
std::vector<std::string> compare_hash_buffers(const NgramHash& computed,
                                              const HashBuffers& checkpoint,
                                              const std::string& layer_name);

// `computed` with every present checkpoint buffer taken over, as HF's loader does (§2.7).
// total_rows becomes max(offset_h + size_h). Throws Corrupt when a present buffer has the wrong
// length or values that cannot index a table (size ≤ 0, offset < 0, negative multiplier).
NgramHash adopt_checkpoint_buffers(const NgramHash& computed, const HashBuffers& checkpoint,
                                   const std::string& layer_name);

}  // namespace cherenkov::model_data::qwen4_exp
