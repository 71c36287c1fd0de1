// Token selection kernels (token_select.h). Every decision is "the largest selection key of a
// set" or "the largest key whose cumulative integer weight (in key order) reaches a target",
// found by a reduction or a radix select over 64-bit keys (8 bits a pass, stopping once one
// candidate is left), the same integers engine/model/token_selector.cpp computes on the host.
// With scratch: many blocks per row find the largest key (max_kernel), which is a greedy row's
// token; for sampled rows they then compact the candidates of non-zero weight, the keys of
// s ≥ best − ~27.7, into the scratch (compact_kernel); then up to 32 blocks per row run the
// selects on that list together (select_kernel), meeting at a barrier after each radix pass.
// Without scratch, one block per greedy row (greedy_kernel). The compaction loses nothing:
// weights are monotone in the key, so the list is the row's top-M keys, and every select but
// top-k ignores zero weights (top-k's cut with k ≥ M keeps the whole list, as the full row
// would). Passes load kBatch values per thread before using any. Each kernel waits for the
// previous one before touching memory and is launched with launch_dependent
// (dependent_launch.cuh). Timings: bench/token_select_cuda_bench, docs/cuda-backend.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/token_select.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// The row-wide passes before the selects: blocks of kSpreadThreads, kSpreadValues values each.
constexpr int kSpreadThreads = 256;
constexpr int64_t kSpreadValues = 4096;
constexpr int kSpreadWarps = kSpreadThreads / 32;
// Per row, ahead of its histograms and lists: the largest key, the candidate count, the barrier
// count, a copy count per select, a select's found key, one spare word.
constexpr int64_t kStateWords = 8;

// selection_key (token_selector.h): NaN below -inf, -0 equal to +0, ties to the lower index.
__device__ inline uint64_t device_selection_key(float value, int64_t index) {
    uint32_t bits = __float_as_uint(value);
    if ((bits & 0x7FFFFFFFU) > 0x7F800000U) {
        bits = 0;
    } else {
        if ((bits & 0x7FFFFFFFU) == 0) bits = 0;
        bits = (bits & 0x80000000U) != 0 ? ~bits : (bits | 0x80000000U);
    }
    return (static_cast<uint64_t>(bits) << 32) |
           static_cast<uint64_t>(0xFFFFFFFFU - static_cast<uint32_t>(index));
}

__device__ inline uint64_t umax(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

__device__ inline uint64_t umin(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}

__device__ inline int32_t token_of(uint64_t key) {
    return static_cast<int32_t>(0xFFFFFFFFU - static_cast<uint32_t>(key));
}

// selection_weight: the double exp rounded to float, in units of 2^-40, truncated.
__device__ inline uint64_t device_selection_weight(float s, float best) {
    if (isnan(s)) return 0;
    const float diff = s - best;
    const auto weight = static_cast<float>(exp(static_cast<double>(diff)));
    return static_cast<uint64_t>(weight * 0x1p40F);
}

// Block-wide max of one value per thread, for any block of whole warps; every thread gets the
// result. `shared` holds a word per warp.
__device__ uint64_t block_max(uint64_t value, uint64_t* shared) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        value = umax(value, __shfl_xor_sync(0xFFFFFFFFU, value, offset));
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    __syncthreads();  // `shared` may still be read from the previous reduction
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    value = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) {
        value = umax(value, __shfl_xor_sync(0xFFFFFFFFU, value, offset));
    }
    return value;
}

constexpr int kDigits = 256;  // of a radix pass (8 bits)
// Values of a row each thread loads before using any: a pass over the row is a chain of
// dependent loads otherwise (one at a time per thread: ~15 µs a pass at vocab 32768, and the
// sampled path makes up to ~20 passes).
constexpr int kBatch = 8;

// Calls f(i, row[i]) for this thread's share of i < n, kBatch loads in flight.
template <typename T, typename F>
__device__ __forceinline__ void for_each_value(const T* row, int64_t n, F&& f) {
    for (int64_t base = threadIdx.x; base < n; base += int64_t{kBatch} * blockDim.x) {
        T v[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
            const int64_t i = base + k * blockDim.x;
            v[k] = i < n ? row[i] : T{};
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
            const int64_t i = base + k * blockDim.x;
            if (i < n) f(i, v[k]);
        }
    }
}
// A sampled row's scratch: [state (kStateWords), three digit histograms (kHistogramWords each),
// keys, weights, spare keys, spare masses (vocab words each)].
struct RowScratch {
    unsigned long long* best;        // the row's largest key (atomicMax)
    unsigned long long* count;       // candidates in the list (atomicAdd)
    unsigned* arrived;               // the row's blocks' barrier arrivals
    unsigned long long* copied;      // [3] candidates copied aside, per select
    unsigned long long* found;       // a select's one remaining candidate
    unsigned long long* histograms;  // [3][2][kDigits]: masses, then counts, per digit
    uint64_t* keys;
    uint64_t* weights;
    uint64_t* spare_keys;  // a select's candidates, once few enough to copy
    uint64_t* spare_masses;
};

constexpr int64_t kHistogramWords = 2 * kDigits;
static_assert(token_select_scratch_words(1) == kStateWords + 3 * kHistogramWords + 4);

__device__ inline RowScratch row_scratch(uint64_t* scratch, int64_t row, int64_t vocab) {
    uint64_t* base = scratch + row * (kStateWords + 3 * kHistogramWords + 4 * vocab);
    auto* words = reinterpret_cast<unsigned long long*>(base);
    uint64_t* lists = base + kStateWords + 3 * kHistogramWords;
    return RowScratch{words,
                      words + 1,
                      reinterpret_cast<unsigned*>(words + 2),
                      words + 3,
                      words + 6,
                      words + kStateWords,
                      lists,
                      lists + vocab,
                      lists + 2 * vocab,
                      lists + 3 * vocab};
}

// grid n_rows · segments (block b: row b ÷ segments, values [kSpreadValues·(b mod segments), …)),
// kSpreadThreads threads. The largest key of the scaled logits (greedy rows: of the logits) into
// the row's state (zeroed by the launcher).
__global__ void __launch_bounds__(kSpreadThreads)
    max_kernel(const float* logits, int64_t vocab, int segments, const TokenChoice* choices,
               uint64_t* scratch) {
    __shared__ uint64_t reduce[kSpreadThreads / 32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x / segments;
    const float temperature = choices[r].temperature;
    const int64_t first = (blockIdx.x % segments) * kSpreadValues;
    const int64_t n = min(kSpreadValues, vocab - first);
    const float* row = logits + r * vocab + first;
    uint64_t best = 0;
    // Greedy: the raw logits' keys (block-uniform branch). One loop dividing greedy rows by 1
    // gives the same keys, but took 8.5 µs at vocab 151936 against these loops' 7.8 (the
    // division; H200, two sessions' runs).
    if (temperature <= 0.0F) {
        for_each_value(row, n, [&](int64_t i, float v) {
            best = umax(best, device_selection_key(v, first + i));
        });
    } else {
        for_each_value(row, n, [&](int64_t i, float v) {
            best = umax(best, device_selection_key(v / temperature, first + i));
        });
    }
    best = block_max(best, reduce);
    if (threadIdx.x == 0) {
        atomicMax(row_scratch(scratch, r, vocab).best, static_cast<unsigned long long>(best));
    }
}

// Same grid as max_kernel. Appends every candidate of non-zero weight (key and weight) to the
// row's list, in no particular order: nothing downstream depends on it (integer sums over keys).
__global__ void __launch_bounds__(kSpreadThreads)
    compact_kernel(const float* logits, int64_t vocab, int segments, const TokenChoice* choices,
                   uint64_t* scratch) {
    wait_for_previous_kernel();  // max_kernel's best key
    allow_next_kernel();
    const int64_t r = blockIdx.x / segments;
    const float temperature = choices[r].temperature;
    if (temperature <= 0.0F) return;
    const RowScratch rs = row_scratch(scratch, r, vocab);
    const float* row = logits + r * vocab;
    const float best = row[token_of(*rs.best)] / temperature;
    if (!isfinite(best)) return;  // the select kernel picks the best token itself
    const int64_t first = (blockIdx.x % segments) * kSpreadValues;
    const int64_t end = min(first + kSpreadValues, vocab);
    const int lane = static_cast<int>(threadIdx.x & 31);
    // The loop bound is warp-uniform: every lane reaches the ballot.
    for (int64_t base = first + (threadIdx.x & ~31); base < end; base += kSpreadThreads) {
        const int64_t i = base + lane;
        const float s = i < end ? row[i] / temperature : 0.0F;
        const uint64_t weight = i < end ? device_selection_weight(s, best) : 0;
        const unsigned taking = __ballot_sync(0xFFFFFFFFU, weight != 0);
        if (taking == 0) continue;
        unsigned long long at = 0;
        if (lane == 0) at = atomicAdd(rs.count, static_cast<unsigned long long>(__popc(taking)));
        at = __shfl_sync(0xFFFFFFFFU, at, 0) + __popc(taking & ((1U << lane) - 1U));
        if (weight != 0) {
            rs.keys[at] = device_selection_key(s, i);
            rs.weights[at] = weight;
        }
    }
}

// grid n_rows, kThreads threads, no scratch: greedy rows reduced by one block each (sampled rows
// need the scratch and get -1).
__global__ void __launch_bounds__(kThreads)
    greedy_kernel(const float* logits, int64_t vocab, const TokenChoice* choices, int32_t* tokens) {
    __shared__ uint64_t reduce[kWarps];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x;
    if (choices[r].temperature > 0.0F) {
        if (threadIdx.x == 0) tokens[r] = -1;
        return;
    }
    const float* row = logits + r * vocab;
    uint64_t best = 0;
    for_each_value(row, vocab,
                   [&](int64_t i, float v) { best = umax(best, device_selection_key(v, i)); });
    best = block_max(best, reduce);
    if (threadIdx.x == 0) tokens[r] = token_of(best);
}

// The blocks of one row's select: rank among `blocks`, and the barrier they meet at.
struct RowGroup {
    int rank;
    int blocks;
    unsigned* arrived;
    unsigned epoch;  // barriers this block has passed

    // Every block of the row reaches it before any leaves; what one block wrote to global memory
    // before it is visible to the others after it. The launcher keeps the grid small enough for
    // every block to be resident at once, so the wait cannot starve.
    __device__ void sync() {
        __syncthreads();
        ++epoch;
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(arrived, 1U);
            const unsigned target = epoch * static_cast<unsigned>(blocks);
            unsigned seen = 0;
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                             : "=r"(seen)
                             : "l"(arrived)
                             : "memory");
            } while (seen < target);
        }
        __syncthreads();
    }
};

struct GroupShared {
    unsigned long long masses[kSpreadWarps][kDigits];
    unsigned counts[kSpreadWarps][kDigits];
    unsigned long long digit_mass[kDigits];
    unsigned long long digit_count[kDigits];
    uint64_t prefix;
    uint64_t remaining;
    uint64_t count;
};

// A select's candidates: keys[i] for i < n with key ≥ floor, weighing masses[i] (every one 1
// when masses is null); those of zero mass do not take part. The lists may have been written by
// other blocks of this launch: they are read through L2 (__ldcg).
struct Candidates {
    const uint64_t* keys;
    const uint64_t* masses;
    int64_t n;
    uint64_t floor;

    __device__ uint64_t mass(int64_t i) const { return masses == nullptr ? 1 : __ldcg(masses + i); }
    // Whether a candidate (key, mass m) takes part and lies in the bucket `prefix` under `mask`.
    __device__ bool takes(uint64_t key, uint64_t m, uint64_t mask, uint64_t prefix) const {
        return key >= floor && (key & mask) == prefix && m != 0;
    }
};

// Calls f(i, key, mass, in_range) for this block's share of the candidates (i = rank·T + t,
// then every blocks·T-th), kBatch keys and masses in flight per thread; the trip count is
// warp-uniform, so f may use warp collectives (in_range false past the end).
template <typename F>
__device__ __forceinline__ void for_each_candidate(const Candidates& c, const RowGroup& g, F&& f) {
    const int64_t stride = int64_t{g.blocks} * kSpreadThreads;
    const int64_t warp_base = int64_t{g.rank} * kSpreadThreads + (threadIdx.x & ~31U);
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int64_t base = warp_base; base < c.n; base += kBatch * stride) {
        uint64_t key[kBatch];
        uint64_t mass[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
            const int64_t i = base + lane + k * stride;
            key[k] = i < c.n ? __ldcg(c.keys + i) : 0;
            mass[k] = i < c.n ? c.mass(i) : 0;
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
            if (base + k * stride >= c.n) break;  // warp-uniform
            const int64_t i = base + lane + k * stride;
            f(i, key[k], mass[k], i < c.n);
        }
    }
}

// Adds (mass, 1) to digit `digit` of this warp's histograms for the lanes with `take`. When
// every taking lane has the same digit (most of a flat row's first passes), the warp adds its
// sum with one atomic instead of 32 on one address.
__device__ __forceinline__ void add_to_histogram(GroupShared& sh, int warp, bool take,
                                                 uint32_t digit, uint64_t mass) {
    const unsigned taking = __ballot_sync(0xFFFFFFFFU, take);
    if (taking == 0) return;
    const int leader = __ffs(static_cast<int>(taking)) - 1;
    const uint32_t leader_digit = __shfl_sync(0xFFFFFFFFU, digit, leader);
    if (__all_sync(0xFFFFFFFFU, !take || digit == leader_digit)) {
        uint64_t sum = take ? mass : 0;
        for (int offset = 16; offset > 0; offset >>= 1) {
            sum += __shfl_xor_sync(0xFFFFFFFFU, sum, offset);
        }
        if (static_cast<int>(threadIdx.x & 31) == leader) {
            atomicAdd(&sh.masses[warp][digit], static_cast<unsigned long long>(sum));
            atomicAdd(&sh.counts[warp][digit], static_cast<unsigned>(__popc(taking)));
        }
        return;
    }
    if (take) {
        atomicAdd(&sh.masses[warp][digit], static_cast<unsigned long long>(mass));
        atomicAdd(&sh.counts[warp][digit], 1U);
    }
}

// Warp 0 of a block: the digit of this pass, the largest d whose suffix weight
// Σ_{d' ≥ d} mass[d'] reaches `remaining` (digit 0 when none does), with `remaining` less the
// weight above it, and d's count, into sh (prefix, remaining, count). Lane l holds digits
// 8l … 8l + 7; the lanes' suffix sums come from a shuffle scan, then the chosen lane walks its
// eight. On the first pass `remaining` is first set to target_of(total).
template <typename TargetOf>
__device__ void choose_digit(GroupShared& sh, const TargetOf& target_of, bool first,
                             uint64_t remaining, uint64_t prefix, int shift) {
    const int lane = static_cast<int>(threadIdx.x & 31);
    uint64_t mine = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) mine += sh.digit_mass[8 * lane + k];
    // above: the weight of the lanes after this one (larger digits).
    uint64_t suffix = mine;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const uint64_t v = __shfl_down_sync(0xFFFFFFFFU, suffix, offset);
        if (lane + offset < 32) suffix += v;
    }
    const uint64_t total = __shfl_sync(0xFFFFFFFFU, suffix, 0);
    if (first) remaining = target_of(total);
    const uint64_t above = suffix - mine;
    const unsigned reaching = __ballot_sync(0xFFFFFFFFU, suffix >= remaining);
    const int chosen = reaching == 0 ? 0 : 31 - __clz(static_cast<int>(reaching));
    if (lane != chosen) return;
    uint64_t running = above;
    int digit = 8 * lane + 7;
    while (digit > 0 && running + sh.digit_mass[digit] < remaining)
        running += sh.digit_mass[digit--];
    sh.prefix = prefix | (static_cast<uint64_t>(digit) << shift);
    sh.remaining = remaining - running;
    sh.count = sh.digit_count[digit];
}

// The largest key k among the candidates such that those with key ≥ k weigh at least
// target_of(total), total the candidates' weight (1 ≤ target ≤ total): the candidate where the
// cumulative weight, walked in key order, first reaches the target. Passes of 8 bits from the
// high byte over every block of the row: each block sums its share into per-warp histograms
// (integer atomics, so exact), adds them into one of the row's three global histograms, and after
// the barrier every block reads the same sums and takes the same decision. The first pass's
// histogram gives the total, so a target that depends on it (top-p, the draw) costs no walk of
// its own. Once the chosen bucket holds one candidate, one more walk finds it; once it holds at
// most a quarter of the candidates, they are copied aside and the later passes walk the copy.
// `pass` counts the row's histogram passes in this launch (pass p uses histogram p mod 3; block
// 0 clears the next one before the barrier, after every block has read it two passes ago).
template <typename TargetOf>
__device__ uint64_t select_by_mass(Candidates c, const TargetOf& target_of, int select,
                                   const RowScratch& rs, RowGroup& g, GroupShared& sh, int& pass) {
    uint64_t prefix = 0;
    uint64_t mask = 0;
    uint64_t remaining = 0;  // set from the first pass's total
    bool copied = false;
    const int lane = static_cast<int>(threadIdx.x & 31);
    const int warp = static_cast<int>(threadIdx.x >> 5);
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < kSpreadWarps * kDigits; d += kSpreadThreads) {
            (&sh.masses[0][0])[d] = 0;
            (&sh.counts[0][0])[d] = 0;
        }
        __syncthreads();
        for_each_candidate(c, g, [&](int64_t, uint64_t key, uint64_t m, bool in_range) {
            const bool take = in_range && c.takes(key, m, mask, prefix);
            add_to_histogram(sh, warp, take, static_cast<uint32_t>((key >> shift) & 0xFF), m);
        });
        __syncthreads();
        unsigned long long* global = rs.histograms + (pass % 3) * kHistogramWords;
        for (int d = threadIdx.x; d < kDigits; d += kSpreadThreads) {
            unsigned long long sum = 0;
            unsigned long long count = 0;
            for (int w = 0; w < kSpreadWarps; ++w) {
                sum += sh.masses[w][d];
                count += sh.counts[w][d];
            }
            if (count != 0) {
                atomicAdd(global + d, sum);
                atomicAdd(global + kDigits + d, count);
            }
        }
        if (g.rank == 0) {
            unsigned long long* next = rs.histograms + ((pass + 1) % 3) * kHistogramWords;
            for (int d = threadIdx.x; d < kHistogramWords; d += kSpreadThreads) next[d] = 0;
        }
        ++pass;
        g.sync();
        for (int d = threadIdx.x; d < kDigits; d += kSpreadThreads) {
            sh.digit_mass[d] = __ldcg(global + d);
            sh.digit_count[d] = __ldcg(global + kDigits + d);
        }
        __syncthreads();
        if (warp == 0) choose_digit(sh, target_of, shift == 56, remaining, prefix, shift);
        __syncthreads();
        prefix = sh.prefix;
        remaining = sh.remaining;
        const uint64_t count = sh.count;
        mask |= uint64_t{0xFF} << shift;
        if (count == 1 && shift > 0) {
            // The bucket's one candidate: the later passes would walk down to its key.
            for_each_candidate(c, g, [&](int64_t, uint64_t key, uint64_t m, bool in_range) {
                if (in_range && c.takes(key, m, mask, prefix)) *rs.found = key;
            });
            g.sync();
            return __ldcg(rs.found);
        }
        if (!copied && shift > 0 && static_cast<int64_t>(count) * 4 <= c.n) {
            // One atomic per warp and batch reserves the warp's places in the copy.
            for_each_candidate(c, g, [&](int64_t, uint64_t key, uint64_t m, bool in_range) {
                const bool take = in_range && c.takes(key, m, mask, prefix);
                const unsigned taking = __ballot_sync(0xFFFFFFFFU, take);
                if (taking == 0) return;
                unsigned long long at = 0;
                if (lane == 0) {
                    at = atomicAdd(rs.copied + select,
                                   static_cast<unsigned long long>(__popc(taking)));
                }
                at = __shfl_sync(0xFFFFFFFFU, at, 0) + __popc(taking & ((1U << lane) - 1U));
                if (take) {
                    rs.spare_keys[at] = key;
                    rs.spare_masses[at] = m;
                }
            });
            g.sync();
            c = Candidates{rs.spare_keys, rs.spare_masses,
                           static_cast<int64_t>(__ldcg(rs.copied + select)), 0};
            copied = true;
        }
    }
    return prefix;
}

// The host's top_p_target and draw_threshold, with the same correctly rounded double operations.
__device__ inline uint64_t device_top_p_target(float top_p, uint64_t total) {
    const double target = ceil(static_cast<double>(top_p) * static_cast<double>(total));
    return umin(static_cast<uint64_t>(target), total);
}

__device__ inline uint64_t device_draw_threshold(double u, uint64_t total) {
    const auto draw = static_cast<uint64_t>(floor(u * static_cast<double>(total)));
    return umin(draw, total - 1);
}

// grid n_rows · blocks, kSpreadThreads threads: the `blocks` blocks of row b ÷ blocks run its
// selects together over the list max_kernel and compact_kernel left in the scratch. Greedy rows
// read their token from the row's largest key.
__global__ void __launch_bounds__(kSpreadThreads)
    select_kernel(const float* logits, int64_t vocab, int blocks, const TokenChoice* choices,
                  uint64_t* scratch, int32_t* tokens) {
    __shared__ GroupShared sh;
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x / blocks;
    const RowScratch rs = row_scratch(scratch, r, vocab);
    RowGroup g{static_cast<int>(blockIdx.x % blocks), blocks, rs.arrived, 0};
    const TokenChoice choice = choices[r];
    const int32_t best_token = token_of(*rs.best);
    if (choice.temperature <= 0.0F) {  // greedy: max_kernel found the largest key
        if (g.rank == 0 && threadIdx.x == 0) tokens[r] = best_token;
        return;
    }
    const float best = logits[r * vocab + best_token] / choice.temperature;
    if (!isfinite(best)) {  // +inf, or nothing finite: the first candidate
        if (g.rank == 0 && threadIdx.x == 0) tokens[r] = best_token;
        return;
    }
    // The list: the row's top-M keys (M ≥ 1: the best key weighs 2^40).
    const auto m = static_cast<int64_t>(*rs.count);
    const uint64_t* keys = rs.keys;
    const uint64_t* w = rs.weights;
    int pass = 0;

    // Top-k: the kept candidates are those with key ≥ the k-th largest key; with k ≥ M that cut
    // lies below the list, which is then kept whole.
    uint64_t kept_floor = 0;
    if (choice.top_k > 0 && choice.top_k < m) {
        const auto k = static_cast<uint64_t>(choice.top_k);
        kept_floor = select_by_mass(
            Candidates{keys, nullptr, m, 0}, [k](uint64_t) { return k; }, 0, rs, g, sh, pass);
    }

    // Top-p: the nucleus is the kept candidates down to the one where the weight reaches
    // ceil(top_p · their weight).
    uint64_t nucleus_floor = kept_floor;
    if (choice.top_p < 1.0F) {
        const float top_p = choice.top_p;
        nucleus_floor = select_by_mass(
            Candidates{keys, w, m, kept_floor},
            [top_p](uint64_t total) { return device_top_p_target(top_p, total); }, 1, rs, g, sh,
            pass);
    }

    // The draw: the first nucleus candidate whose cumulative weight exceeds d = ⌊u · the
    // nucleus weight⌋.
    const double u = choice.u;
    const uint64_t picked = select_by_mass(
        Candidates{keys, w, m, nucleus_floor},
        [u](uint64_t total) { return device_draw_threshold(u, total) + 1; }, 2, rs, g, sh, pass);
    if (g.rank == 0 && threadIdx.x == 0) tokens[r] = token_of(picked);
}

// Rows per select launch: all of them while one block each stays resident (more go in several
// launches). Asked once per call: the occupancy query reads only the kernel's attributes (no
// work is queued, so it may run under stream capture), the multiprocessors are the model's.
int64_t select_rows_per_launch() {
    int per_sm = 0;
    CHERENKOV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, select_kernel, kSpreadThreads, 0));
    return std::max<int64_t>(1, int64_t{per_sm} * kernel_policy().multiprocessors / 2);
}

// Blocks per sampled row's select: enough that each walks ~4k candidates of a full list, and
// few enough that every block of the launch is resident at once (their barriers wait for each
// other), with half the device left for whatever still runs. resident: select_rows_per_launch().
int select_blocks(int64_t n_rows, int64_t vocab, int64_t resident) {
    const int64_t wanted = std::clamp<int64_t>((vocab + 4095) / 4096, 1, 32);
    const int64_t fit = std::max<int64_t>(1, resident / std::max<int64_t>(n_rows, 1));
    return static_cast<int>(std::min(wanted, fit));
}

}  // namespace

void token_select(const float* logits, int64_t n_rows, int64_t vocab, const TokenChoice* choices,
                  uint64_t* scratch, int32_t* tokens, void* stream) {
    if (n_rows < 0) throw_invalid("[token_select] n_rows " + std::to_string(n_rows) + " < 0");
    if (n_rows == 0) return;
    if (vocab < 1 || vocab > INT32_MAX) {
        throw_invalid("[token_select] vocab " + std::to_string(vocab) + " outside [1, 2^31)");
    }
    if (n_rows > INT32_MAX) throw_invalid("[token_select] n_rows " + std::to_string(n_rows));
    if (logits == nullptr || choices == nullptr || tokens == nullptr) {
        throw_invalid("[token_select] null logits, choices or tokens");
    }
    const auto cs = static_cast<cudaStream_t>(stream);
    if (scratch == nullptr) {
        launch_dependent(greedy_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(kThreads), 0, cs,
                         logits, vocab, choices, tokens);
        return;
    }
    // Every row's state (largest key, list length, barrier and copy counts) and its first two
    // histograms start at zero.
    const size_t pitch = static_cast<size_t>(token_select_scratch_words(vocab)) * sizeof(uint64_t);
    CHERENKOV_CUDA_CHECK(cudaMemset2DAsync(scratch, pitch, 0,
                                           (kStateWords + 2 * kHistogramWords) * sizeof(uint64_t),
                                           static_cast<size_t>(n_rows), cs));
    const auto segments = static_cast<int>((vocab + kSpreadValues - 1) / kSpreadValues);
    const int64_t blocks = n_rows * segments;
    if (blocks > INT32_MAX) throw_invalid("[token_select] too many rows for the row passes");
    launch_dependent(max_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kSpreadThreads), 0, cs,
                     logits, vocab, segments, choices, scratch);
    launch_dependent(compact_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kSpreadThreads), 0,
                     cs, logits, vocab, segments, choices, scratch);
    const int64_t words = token_select_scratch_words(vocab);
    const int64_t resident = select_rows_per_launch();
    for (int64_t r0 = 0; r0 < n_rows; r0 += resident) {
        const int64_t rows = std::min(n_rows - r0, resident);
        const int per_row = select_blocks(rows, vocab, resident);
        launch_dependent(select_kernel, dim3(static_cast<unsigned>(rows * per_row)),
                         dim3(kSpreadThreads), 0, cs, logits + r0 * vocab, vocab, per_row,
                         choices + r0, scratch + r0 * words, tokens + r0);
    }
}

}  // namespace cherenkov::engine::cuda
