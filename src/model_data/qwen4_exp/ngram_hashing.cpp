// docs/qwen4_exp.md §3.4: splitmix64 multipliers, prime head sizes, offsets and n-gram ids.
#include "model_data/qwen4_exp/ngram_hashing.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::model_data::qwen4_exp {

namespace {

constexpr uint64_t kInt63Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Bounds that Config enforces too; they keep the prime search and every sum in range.
constexpr int64_t kMaxNgramSize = 16;
constexpr int64_t kMaxHeadsPerNgram = 256;
constexpr int64_t kMaxVocabBase = int64_t{1} << 40;
constexpr int64_t kMaxDivisor = int64_t{1} << 20;
constexpr int64_t kMaxPleLayerIndex = int64_t{1} << 16;

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t modulus) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % modulus);
}

uint64_t pow_mod(uint64_t base, uint64_t exponent, uint64_t modulus) {
    uint64_t result = 1;
    base %= modulus;
    while (exponent > 0) {
        if (exponent & 1) result = mul_mod(result, base, modulus);
        base = mul_mod(base, base, modulus);
        exponent >>= 1;
    }
    return result;
}

// One Miller-Rabin round: true when `n` is a strong probable prime to `witness`.
bool strong_probable_prime(uint64_t n, uint64_t witness, uint64_t odd_part, int twos) {
    uint64_t x = pow_mod(witness, odd_part, n);
    if (x == 1 || x == n - 1) return true;
    for (int round = 1; round < twos; ++round) {
        x = mul_mod(x, x, n);
        if (x == n - 1) return true;
    }
    return false;
}

void check_params(const NgramHashParams& params, int64_t ple_layer_index) {
    auto fail = [](const std::string& what) { throw_invalid("n-gram hashing: " + what); };
    if (params.vocab_size < 1) fail("vocab_size must be positive");
    if (params.ngram_size < 2 || params.ngram_size > kMaxNgramSize) {
        fail("ngram_size must be in [2, " + std::to_string(kMaxNgramSize) + "]");
    }
    if (params.heads_per_ngram < 1 || params.heads_per_ngram > kMaxHeadsPerNgram) {
        fail("heads_per_ngram must be in [1, " + std::to_string(kMaxHeadsPerNgram) + "]");
    }
    if (params.vocab_size_base < 1 || params.vocab_size_base > kMaxVocabBase) {
        fail("ngram_vocab_size_base must be in [1, 2^40]");
    }
    if (params.divisible_by < 1 || params.divisible_by > kMaxDivisor) {
        fail("make_ngram_vocab_size_divisible_by must be in [1, 2^20]");
    }
    if (params.eos_token_id < 0 || params.eos_token_id >= params.vocab_size) {
        fail("eos_token_id " + std::to_string(params.eos_token_id) + " is outside [0, vocab_size)");
    }
    if (ple_layer_index < 0 || ple_layer_index > kMaxPleLayerIndex) {
        fail("ple_layer_index " + std::to_string(ple_layer_index) + " is out of range");
    }
}

}  // namespace

uint64_t splitmix64(uint64_t value) {
    value += kSplitmixGamma;
    value = (value ^ (value >> 30)) * kSplitmixM1;
    value = (value ^ (value >> 27)) * kSplitmixM2;
    return value ^ (value >> 31);
}

bool is_prime_u64(uint64_t n) {
    if (n < 2) return false;
    // These 12 bases decide primality exactly for n < 3.3·10^24 (Sorenson & Webster).
    static constexpr uint64_t kWitnesses[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    for (uint64_t small : kWitnesses) {
        if (n % small == 0) return n == small;
    }
    uint64_t odd_part = n - 1;
    int twos = 0;
    while ((odd_part & 1) == 0) {
        odd_part >>= 1;
        ++twos;
    }
    for (uint64_t witness : kWitnesses) {
        if (!strong_probable_prime(n, witness, odd_part, twos)) return false;
    }
    return true;
}

uint64_t next_prime_at_least(uint64_t n) {
    for (uint64_t candidate = std::max<uint64_t>(n, 2); candidate <= kInt63Max; ++candidate) {
        if (is_prime_u64(candidate)) return candidate;
    }
    throw_invalid("n-gram hashing: no prime >= " + std::to_string(n) + " below 2^63");
}

NgramHashParams NgramHashParams::from_config(const Config& config) {
    NgramHashParams params;
    params.vocab_size = config.vocab_size;
    params.seed = config.seed;
    params.ngram_size = config.ngram_size;
    params.heads_per_ngram = config.heads_per_ngram;
    params.vocab_size_base = config.ngram_vocab_size_base;
    params.divisible_by = config.make_ngram_vocab_size_divisible_by;
    params.eos_token_id = config.first_eos();
    return params;
}

namespace {

// One layer's constants whose first head size is `first_prime` (the (G+1)-th prime ≥ base for
// G = ple_layer_index·NH). Returns the next unused prime through `next_prime`.
NgramHash build_from_prime(const NgramHashParams& params, int64_t ple_layer_index,
                           uint64_t first_prime, uint64_t& next_prime) {
    NgramHash hash;
    hash.params = params;
    hash.ple_layer_index = ple_layer_index;

    // Multipliers: m_j = 2·(splitmix64(base + GAMMA·(j+1)) mod hb) + 1.
    const uint64_t mmax = kInt63Max / static_cast<uint64_t>(params.vocab_size);
    const uint64_t half = std::max<uint64_t>(1, mmax / 2);
    const uint64_t base = params.seed + kNgramPrime1 * static_cast<uint64_t>(ple_layer_index);
    for (int64_t order = 0; order < params.ngram_size; ++order) {
        const uint64_t mixed = splitmix64(base + kSplitmixGamma * static_cast<uint64_t>(order + 1));
        hash.layer_multipliers.push_back(static_cast<int64_t>(2 * (mixed % half) + 1));
    }

    // Head sizes: consecutive primes; offsets restart at 0 in every layer.
    const int64_t n_heads = (params.ngram_size - 1) * params.heads_per_ngram;
    uint64_t prime = first_prime;
    int64_t offset = 0;
    for (int64_t head = 0; head < n_heads; ++head) {
        if (head > 0) prime = next_prime_at_least(prime + 1);
        hash.head_vocab_sizes.push_back(static_cast<int64_t>(prime));
        hash.head_offsets.push_back(offset);
        offset += static_cast<int64_t>(prime);
    }
    next_prime = next_prime_at_least(prime + 1);
    hash.total_rows = offset;
    hash.padded_rows =
        (offset + params.divisible_by - 1) / params.divisible_by * params.divisible_by;
    return hash;
}

}  // namespace

NgramHash build_ngram_hash(const NgramHashParams& params, int64_t ple_layer_index) {
    check_params(params, ple_layer_index);
    // The first head of layer i is the (i·NH + 1)-th prime ≥ base.
    const int64_t n_heads = (params.ngram_size - 1) * params.heads_per_ngram;
    uint64_t prime = next_prime_at_least(static_cast<uint64_t>(params.vocab_size_base));
    for (int64_t skipped = 0; skipped < ple_layer_index * n_heads; ++skipped) {
        prime = next_prime_at_least(prime + 1);
    }
    uint64_t next_prime = 0;
    return build_from_prime(params, ple_layer_index, prime, next_prime);
}

std::vector<NgramHash> build_all_ngram_hashes(const Config& config) {
    const NgramHashParams params = NgramHashParams::from_config(config);
    std::vector<NgramHash> hashes;
    if (!config.has_ple()) return hashes;
    check_params(params, config.n_ple_layers() - 1);
    uint64_t prime = next_prime_at_least(static_cast<uint64_t>(params.vocab_size_base));
    for (int64_t index = 0; index < config.n_ple_layers(); ++index) {
        hashes.push_back(build_from_prime(params, index, prime, prime));
    }
    return hashes;
}

NgramHash build_ngram_hash(const Config& config, int64_t ple_layer_index) {
    return build_ngram_hash(NgramHashParams::from_config(config), ple_layer_index);
}

std::vector<int64_t> initial_ngram_context(const NgramHash& hash) {
    return std::vector<int64_t>(static_cast<size_t>(hash.context_len()), hash.params.eos_token_id);
}

void ngram_ids_into(const NgramHash& hash, std::span<int64_t> context,
                    std::span<const int64_t> tokens, std::span<int64_t> ids_out) {
    const auto n_context = static_cast<size_t>(hash.context_len());
    const auto n_heads = static_cast<size_t>(hash.n_heads());
    const auto n_orders = static_cast<size_t>(hash.params.ngram_size);
    const int64_t eos = hash.params.eos_token_id;
    const int64_t vocab = hash.params.vocab_size;
    if (context.size() != n_context) {
        throw_invalid("n-gram ids: context has " + std::to_string(context.size()) +
                      " ids, expected " + std::to_string(n_context));
    }
    if (ids_out.size() != tokens.size() * n_heads) {
        throw_invalid("n-gram ids: output has " + std::to_string(ids_out.size()) +
                      " slots, expected " + std::to_string(tokens.size() * n_heads));
    }
    for (size_t index = 0; index < n_context + tokens.size(); ++index) {
        const int64_t id = index < n_context ? context[index] : tokens[index - n_context];
        if (id < 0 || id >= vocab) {
            throw_invalid("n-gram ids: token id " + std::to_string(id) + " is outside [0, " +
                          std::to_string(vocab) + ")");
        }
    }
    // h = context ++ tokens, indexed without materializing it.
    auto history = [&](size_t index) {
        return index < n_context ? context[index] : tokens[index - n_context];
    };
    uint64_t orders[kMaxNgramSize];  // s_0 .. s_{N-1}
    for (size_t token = 0; token < tokens.size(); ++token) {
        const size_t position = n_context + token;
        orders[0] = static_cast<uint64_t>(history(position));
        // s_k = h[i-k] while no EOS lies in [i-k, i-1]; EOS from the first one on.
        bool segment_ended = false;
        for (size_t back = 1; back < n_orders; ++back) {
            const int64_t previous = history(position - back);
            if (previous == eos) segment_ended = true;
            orders[back] = static_cast<uint64_t>(segment_ended ? eos : previous);
        }
        uint64_t mix = orders[0] * static_cast<uint64_t>(hash.layer_multipliers[0]);
        for (size_t order = 1; order < n_orders; ++order) {
            // mix_n for n = order + 1 includes s_0 .. s_order.
            mix ^= orders[order] * static_cast<uint64_t>(hash.layer_multipliers[order]);
            const size_t first_head =
                (order - 1) * static_cast<size_t>(hash.params.heads_per_ngram);
            for (size_t head = first_head;
                 head < first_head + static_cast<size_t>(hash.params.heads_per_ngram); ++head) {
                const auto size = static_cast<uint64_t>(hash.head_vocab_sizes[head]);
                ids_out[token * n_heads + head] =
                    static_cast<int64_t>(mix % size) + hash.head_offsets[head];
            }
        }
    }
    // New context: the last N-1 entries of h.
    int64_t updated[kMaxNgramSize];
    const size_t n_history = n_context + tokens.size();
    for (size_t slot = 0; slot < n_context; ++slot) {
        updated[slot] = history(n_history - n_context + slot);
    }
    std::copy(updated, updated + n_context, context.begin());
}

NgramIds ngram_ids(const NgramHash& hash, std::span<const int64_t> context,
                   std::span<const int64_t> tokens) {
    NgramIds result;
    result.context.assign(context.begin(), context.end());
    result.ids.resize(tokens.size() * static_cast<size_t>(hash.n_heads()));
    ngram_ids_into(hash, result.context, tokens, result.ids);
    return result;
}

namespace {

void compare_one(const std::vector<int64_t>& computed, const std::vector<int64_t>& stored,
                 const std::string& label, std::vector<std::string>& out) {
    if (stored.empty()) return;
    if (stored.size() != computed.size()) {
        out.push_back(label + ": checkpoint has " + std::to_string(stored.size()) +
                      " values, computed " + std::to_string(computed.size()));
        return;
    }
    const auto [computed_it, stored_it] =
        std::mismatch(computed.begin(), computed.end(), stored.begin());
    if (computed_it == computed.end()) return;
    const auto index = computed_it - computed.begin();
    const auto n_differ = std::inner_product(
        computed.begin(), computed.end(), stored.begin(), size_t{0}, std::plus<>(),
        [](int64_t a, int64_t b) { return static_cast<size_t>(a != b); });
    out.push_back(label + ": " + std::to_string(n_differ) + " of " +
                  std::to_string(computed.size()) + " values differ; first at [" +
                  std::to_string(index) + "]: checkpoint " + std::to_string(*stored_it) +
                  ", computed " + std::to_string(*computed_it));
}

void check_length(const std::vector<int64_t>& stored, size_t expected, const std::string& label) {
    if (!stored.empty() && stored.size() != expected) {
        throw_corrupt(label + ": has " + std::to_string(stored.size()) + " values, expected " +
                      std::to_string(expected));
    }
}

}  // namespace

std::vector<std::string> compare_hash_buffers(const NgramHash& computed,
                                              const HashBuffers& checkpoint,
                                              const std::string& layer_name) {
    std::vector<std::string> mismatches;
    compare_one(computed.layer_multipliers, checkpoint.layer_multipliers,
                layer_name + ".layer_multipliers", mismatches);
    compare_one(computed.head_vocab_sizes, checkpoint.head_vocab_sizes,
                layer_name + ".ngram_heads_vocab_sizes", mismatches);
    compare_one(computed.head_offsets, checkpoint.head_offsets, layer_name + ".ngram_heads_offsets",
                mismatches);
    return mismatches;
}

NgramHash adopt_checkpoint_buffers(const NgramHash& computed, const HashBuffers& checkpoint,
                                   const std::string& layer_name) {
    const std::string multipliers = layer_name + ".layer_multipliers";
    const std::string sizes = layer_name + ".ngram_heads_vocab_sizes";
    const std::string offsets = layer_name + ".ngram_heads_offsets";
    check_length(checkpoint.layer_multipliers, computed.layer_multipliers.size(), multipliers);
    check_length(checkpoint.head_vocab_sizes, computed.head_vocab_sizes.size(), sizes);
    check_length(checkpoint.head_offsets, computed.head_offsets.size(), offsets);
    NgramHash adopted = computed;
    if (!checkpoint.layer_multipliers.empty())
        adopted.layer_multipliers = checkpoint.layer_multipliers;
    if (!checkpoint.head_vocab_sizes.empty())
        adopted.head_vocab_sizes = checkpoint.head_vocab_sizes;
    if (!checkpoint.head_offsets.empty()) adopted.head_offsets = checkpoint.head_offsets;
    for (size_t order = 0; order < adopted.layer_multipliers.size(); ++order) {
        if (adopted.layer_multipliers[order] < 0) {
            throw_corrupt(multipliers + "[" + std::to_string(order) + "]: negative value " +
                          std::to_string(adopted.layer_multipliers[order]));
        }
    }
    int64_t total = 0;
    for (size_t head = 0; head < adopted.head_vocab_sizes.size(); ++head) {
        const int64_t size = adopted.head_vocab_sizes[head];
        const int64_t offset = adopted.head_offsets[head];
        const std::string at = "[" + std::to_string(head) + "]";
        if (size <= 0)
            throw_corrupt(sizes + at + ": must be positive, got " + std::to_string(size));
        if (offset < 0) {
            throw_corrupt(offsets + at + ": must be non-negative, got " + std::to_string(offset));
        }
        if (offset > std::numeric_limits<int64_t>::max() - size) {
            throw_corrupt(offsets + at + ": offset + size overflows int64");
        }
        total = std::max(total, offset + size);
    }
    const int64_t divisor = adopted.params.divisible_by;
    if (total > std::numeric_limits<int64_t>::max() - divisor) {
        throw_corrupt(sizes + ": table size overflows int64");
    }
    adopted.total_rows = total;
    adopted.padded_rows = (total + divisor - 1) / divisor * divisor;
    return adopted;
}

}  // namespace cherenkov::model_data::qwen4_exp
