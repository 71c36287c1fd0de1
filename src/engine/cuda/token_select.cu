// Token selection kernels (token_select.h). Every decision is "the largest selection key of a
// set" or "the largest key whose cumulative integer weight (in key order) reaches a target",
// found by a reduction or a radix select over 64-bit keys (8 bits a pass, stopping once one
// candidate is left), the same integers engine/model/token_selector.cpp computes on the host.
// Greedy rows: one block per row (select_kernel). Sampled rows: first many blocks per row find
// the largest key (max_kernel), then compact the candidates of non-zero weight, the keys of
// s ≥ best − ~27.7, into the caller's scratch (compact_kernel); then one block per row runs the
// selects on that list (select_kernel). The compaction loses nothing: weights are monotone in
// the key, so the list is the row's top-M keys, and every select but top-k ignores zero weights
// (top-k's cut with k ≥ M keeps the whole list, as the full row would). One block per row over
// the whole row took 298 µs for a confident row at vocab 151936 (top-p), now 28
// (bench/token_select_cuda_bench; docs/cuda-backend.md has the table). Passes load kBatch values
// per thread before using any. Each kernel waits for the previous one
// before touching memory and is launched with launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

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
// Per sampled row, ahead of its keys and weights: the largest key and the candidate count.
constexpr int64_t kStateWords = 2;
static_assert(token_select_scratch_words(1) == kStateWords + 4);

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

constexpr int kDigits = 256;
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
// Dynamic shared memory: per warp, a mass and a count histogram of the digits. A single
// block-wide histogram serialized the atomics: most candidates share a few top digits (the float
// exponent), so a pass was ~vocab same-address atomics in a row.
constexpr size_t kHistogramBytes =
    (sizeof(unsigned long long) + sizeof(unsigned)) * size_t{kWarps} * kDigits;

struct SelectShared {
    uint64_t reduce[kWarps];
    uint64_t prefix;
    uint64_t remaining;
    unsigned count;
    unsigned copied;  // candidates copied to the spare list
    uint64_t found;
};

// A select's candidates: keys[i] for i < n with key ≥ floor, weighing masses[i] (every one 1
// when masses is null); those of zero mass do not take part.
struct Candidates {
    const uint64_t* keys;
    const uint64_t* masses;
    int64_t n;
    uint64_t floor;

    __device__ uint64_t mass(int64_t i) const { return masses == nullptr ? 1 : masses[i]; }
};

// Room for one copy of a select's candidates (as many keys and masses as the list holds).
struct Spare {
    uint64_t* keys;
    uint64_t* masses;
};

// The largest key k among the candidates such that those with key ≥ k weigh at least
// target_of(total), total the candidates' weight (1 ≤ target ≤ total): the candidate where the
// cumulative weight, walked in key order, first reaches the target. The first pass's histogram
// gives the total, so a target that depends on it (top-p, the draw) costs no walk of its own.
// Passes of 8 bits from the high byte; bucket weights are integer
// atomics into per-warp histograms, added up per digit, so exact. Once the chosen bucket holds
// one candidate, that candidate is the answer: one more pass finds it instead of a pass per
// remaining byte. Once it holds at most a quarter of the candidates, they are copied to `spare`
// and the later passes walk the copy (a flat row's first passes keep most of the row; each pass
// walked all of it again).
template <typename TargetOf>
__device__ uint64_t select_by_mass(Candidates c, const TargetOf& target_of, Spare spare,
                                   SelectShared& sh, unsigned long long* masses) {
    auto* counts = reinterpret_cast<unsigned*>(masses + kWarps * kDigits);
    unsigned long long* my_masses = masses + (threadIdx.x >> 5) * kDigits;
    unsigned* my_counts = counts + (threadIdx.x >> 5) * kDigits;
    uint64_t prefix = 0;
    uint64_t mask = 0;
    uint64_t remaining = 0;  // set from the first pass's total
    bool copied = false;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < kWarps * kDigits; d += blockDim.x) {
            masses[d] = 0;
            counts[d] = 0;
        }
        __syncthreads();
        for_each_value(c.keys, c.n, [&](int64_t i, uint64_t key) {
            if (key < c.floor || (key & mask) != prefix) return;
            const uint64_t m = c.mass(i);
            if (m == 0) return;
            const auto digit = static_cast<uint32_t>((key >> shift) & 0xFF);
            atomicAdd(&my_masses[digit], static_cast<unsigned long long>(m));
            atomicAdd(&my_counts[digit], 1U);
        });
        __syncthreads();
        // Digit d's totals into warp 0's histograms (thread d alone touches column d).
        for (int d = threadIdx.x; d < kDigits; d += blockDim.x) {
            unsigned long long sum = 0;
            unsigned count = 0;
            for (int w = 0; w < kWarps; ++w) {
                sum += masses[w * kDigits + d];
                count += counts[w * kDigits + d];
            }
            masses[d] = sum;
            counts[d] = count;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (shift == 56) {
                uint64_t total = 0;
                for (int d = 0; d < kDigits; ++d) total += masses[d];
                remaining = target_of(total);
            }
            uint64_t above = 0;  // weight of the matching keys with a larger digit
            int digit = 255;
            while (digit > 0 && above + masses[digit] < remaining) above += masses[digit--];
            sh.prefix = prefix | (static_cast<uint64_t>(digit) << shift);
            sh.remaining = remaining - above;
            sh.count = counts[digit];
            sh.copied = 0;
        }
        __syncthreads();
        prefix = sh.prefix;
        remaining = sh.remaining;
        mask |= uint64_t{0xFF} << shift;
        if (sh.count == 1 && shift > 0) {
            // The bucket's one candidate: the later passes would walk down to its key.
            for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
                const uint64_t key = c.keys[i];
                if (key >= c.floor && (key & mask) == prefix && c.mass(i) != 0) sh.found = key;
            }
            __syncthreads();
            return sh.found;
        }
        if (!copied && shift > 0 && int64_t{sh.count} * 4 <= c.n) {
            for_each_value(c.keys, c.n, [&](int64_t i, uint64_t key) {
                if (key < c.floor || (key & mask) != prefix) return;
                const uint64_t m = c.mass(i);
                if (m == 0) return;
                const unsigned at = atomicAdd(&sh.copied, 1U);
                spare.keys[at] = key;
                spare.masses[at] = m;
            });
            __syncthreads();  // the copy (global memory, this block only) and sh.copied
            c = Candidates{spare.keys, spare.masses, sh.copied, 0};
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

// A sampled row's scratch: [state (kStateWords), keys, weights, spare keys, spare masses], the
// last four vocab words each.
struct RowScratch {
    unsigned long long* best;   // the row's largest key (atomicMax)
    unsigned long long* count;  // candidates in the list (atomicAdd)
    uint64_t* keys;
    uint64_t* weights;
    Spare spare;  // a select's candidates, once few enough to copy
};

__device__ inline RowScratch row_scratch(uint64_t* scratch, int64_t row, int64_t vocab) {
    uint64_t* base = scratch + row * (kStateWords + 4 * vocab);
    uint64_t* lists = base + kStateWords;
    return RowScratch{reinterpret_cast<unsigned long long*>(base),
                      reinterpret_cast<unsigned long long*>(base + 1), lists, lists + vocab,
                      Spare{lists + 2 * vocab, lists + 3 * vocab}};
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
    if (!isfinite(best)) return;  // select_kernel picks the best token itself
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

// grid n_rows, kThreads threads. scratch: [n_rows, token_select_scratch_words(vocab)], filled
// by max_kernel (every row's largest key) and compact_kernel (sampled rows' lists), or null
// (greedy rows only, each then reduced here by one block).
__global__ void __launch_bounds__(kThreads)
    select_kernel(const float* logits, int64_t vocab, const TokenChoice* choices, uint64_t* scratch,
                  int32_t* tokens) {
    __shared__ SelectShared sh;
    extern __shared__ unsigned long long histograms[];  // kHistogramBytes
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x;
    const float* row = logits + r * vocab;
    const TokenChoice choice = choices[r];

    if (choice.temperature <= 0.0F) {  // greedy: the largest key of the raw logits
        if (scratch != nullptr) {      // max_kernel found it over many blocks
            if (threadIdx.x == 0) tokens[r] = token_of(*row_scratch(scratch, r, vocab).best);
            return;
        }
        uint64_t best = 0;
        for_each_value(row, vocab,
                       [&](int64_t i, float v) { best = umax(best, device_selection_key(v, i)); });
        best = block_max(best, sh.reduce);
        if (threadIdx.x == 0) tokens[r] = token_of(best);
        return;
    }
    if (scratch == nullptr) {
        if (threadIdx.x == 0) tokens[r] = -1;
        return;
    }
    const RowScratch rs = row_scratch(scratch, r, vocab);
    const int32_t best_token = token_of(*rs.best);
    const float best = row[best_token] / choice.temperature;
    if (!isfinite(best)) {  // +inf, or nothing finite: the first candidate
        if (threadIdx.x == 0) tokens[r] = best_token;
        return;
    }
    // The list: the row's top-M keys (M ≥ 1: the best key weighs 2^40).
    const auto m = static_cast<int64_t>(*rs.count);
    const uint64_t* keys = rs.keys;
    const uint64_t* w = rs.weights;

    // Top-k: the kept candidates are those with key ≥ the k-th largest key; with k ≥ M that cut
    // lies below the list, which is then kept whole.
    uint64_t kept_floor = 0;
    if (choice.top_k > 0 && choice.top_k < m) {
        const auto k = static_cast<uint64_t>(choice.top_k);
        kept_floor = select_by_mass(
            Candidates{keys, nullptr, m, 0}, [k](uint64_t) { return k; }, rs.spare, sh, histograms);
    }

    // Top-p: the nucleus is the kept candidates down to the one where the weight reaches
    // ceil(top_p · their weight).
    uint64_t nucleus_floor = kept_floor;
    if (choice.top_p < 1.0F) {
        const float top_p = choice.top_p;
        nucleus_floor = select_by_mass(
            Candidates{keys, w, m, kept_floor},
            [top_p](uint64_t total) { return device_top_p_target(top_p, total); }, rs.spare, sh,
            histograms);
    }

    // The draw: the first nucleus candidate whose cumulative weight exceeds d = ⌊u · the
    // nucleus weight⌋.
    const double u = choice.u;
    const uint64_t picked = select_by_mass(
        Candidates{keys, w, m, nucleus_floor},
        [u](uint64_t total) { return device_draw_threshold(u, total) + 1; }, rs.spare, sh,
        histograms);
    if (threadIdx.x == 0) tokens[r] = token_of(picked);
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
    static const bool configured = [] {
        CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(select_kernel,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kHistogramBytes)));
        return true;
    }();
    (void)configured;
    const auto cs = static_cast<cudaStream_t>(stream);
    if (scratch != nullptr) {
        // Every row's state (largest key, list length) starts at zero.
        const size_t pitch =
            static_cast<size_t>(token_select_scratch_words(vocab)) * sizeof(uint64_t);
        CHERENKOV_CUDA_CHECK(cudaMemset2DAsync(scratch, pitch, 0, kStateWords * sizeof(uint64_t),
                                               static_cast<size_t>(n_rows), cs));
        const auto segments = static_cast<int>((vocab + kSpreadValues - 1) / kSpreadValues);
        const int64_t blocks = n_rows * segments;
        if (blocks > INT32_MAX) throw_invalid("[token_select] too many rows for the row passes");
        launch_dependent(max_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kSpreadThreads), 0,
                         cs, logits, vocab, segments, choices, scratch);
        launch_dependent(compact_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kSpreadThreads),
                         0, cs, logits, vocab, segments, choices, scratch);
    }
    launch_dependent(select_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(kThreads),
                     kHistogramBytes, cs, logits, vocab, choices, scratch, tokens);
}

}  // namespace cherenkov::engine::cuda
