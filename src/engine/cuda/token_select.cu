// Token selection kernels (token_select.h): one block per row. Every decision is "the largest
// selection key of a set" or "the largest key whose cumulative integer weight (in key order)
// reaches a target", found by a block reduction or a radix select over 64-bit keys (8 bits a
// pass, stopping once one candidate is left), the same integers engine/model/token_selector.cpp
// computes on the host. A sampled row's keys are computed once into the caller's scratch; passes
// load kBatch values per thread before using any. H200, vocab 32768: a sampled row (top-p) takes
// 183-192 µs, a greedy one 10-11 µs (was 425-443 and 17-18). The kernel waits for the
// previous kernel before touching memory and is launched with launch_dependent
// (dependent_launch.cuh).
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

// Block-wide max or sum of one value per thread; every thread gets the result. `shared` holds
// kWarps words. Integer operations, so the result does not depend on the reduction order.
template <bool Sum>
__device__ uint64_t block_reduce(uint64_t value, uint64_t* shared) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const uint64_t other = __shfl_xor_sync(0xFFFFFFFFU, value, offset);
        value = Sum ? value + other : (other > value ? other : value);
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    __syncthreads();  // `shared` may still be read from the previous reduction
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    value = lane < kWarps ? shared[lane] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) {
        const uint64_t other = __shfl_xor_sync(0xFFFFFFFFU, value, offset);
        value = Sum ? value + other : (other > value ? other : value);
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
    uint64_t found;
};

// The largest key k among the keys ≥ floor such that the candidates with key ≥ k weigh at least
// `target` (1 ≤ target ≤ the set's weight): the candidate where the cumulative weight, walked in
// key order, first reaches the target. keys: the row's selection keys; mass(i) a candidate's
// weight (1 for top-k counts), 0 for those that do not take part. Passes of 8 bits from the high
// byte; bucket weights are integer atomics into per-warp histograms, added up per digit, so
// exact. Once the chosen bucket holds one candidate, that candidate is the answer: one more pass
// finds it instead of a pass per remaining byte.
template <typename Mass>
__device__ uint64_t select_by_mass(int64_t vocab, uint64_t floor, uint64_t target,
                                   const uint64_t* keys, const Mass& mass, SelectShared& sh,
                                   unsigned long long* masses) {
    auto* counts = reinterpret_cast<unsigned*>(masses + kWarps * kDigits);
    unsigned long long* my_masses = masses + (threadIdx.x >> 5) * kDigits;
    unsigned* my_counts = counts + (threadIdx.x >> 5) * kDigits;
    uint64_t prefix = 0;
    uint64_t mask = 0;
    uint64_t remaining = target;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < kWarps * kDigits; d += blockDim.x) {
            masses[d] = 0;
            counts[d] = 0;
        }
        __syncthreads();
        for_each_value(keys, vocab, [&](int64_t i, uint64_t key) {
            if (key < floor || (key & mask) != prefix) return;
            const uint64_t m = mass(i);
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
            uint64_t above = 0;  // weight of the matching keys with a larger digit
            int digit = 255;
            while (digit > 0 && above + masses[digit] < remaining) above += masses[digit--];
            sh.prefix = prefix | (static_cast<uint64_t>(digit) << shift);
            sh.remaining = remaining - above;
            sh.count = counts[digit];
        }
        __syncthreads();
        prefix = sh.prefix;
        remaining = sh.remaining;
        mask |= uint64_t{0xFF} << shift;
        if (sh.count == 1 && shift > 0) {
            // The bucket's one candidate: the later passes would walk down to its key.
            for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
                const uint64_t key = keys[i];
                if (key >= floor && (key & mask) == prefix && mass(i) != 0) sh.found = key;
            }
            __syncthreads();
            return sh.found;
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

// grid n_rows, kThreads threads. scratch: [n_rows, 2·vocab] (keys, then weights) or null
// (greedy rows only).
__global__ void __launch_bounds__(kThreads)
    token_select_kernel(const float* logits, int64_t vocab, const TokenChoice* choices,
                        uint64_t* scratch, int32_t* tokens) {
    __shared__ SelectShared sh;
    extern __shared__ unsigned long long histograms[];  // kHistogramBytes
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x;
    const float* row = logits + r * vocab;
    const TokenChoice choice = choices[r];

    if (choice.temperature <= 0.0F) {  // greedy: the largest key of the raw logits
        uint64_t best = 0;
        for_each_value(row, vocab,
                       [&](int64_t i, float v) { best = umax(best, device_selection_key(v, i)); });
        best = block_reduce<false>(best, sh.reduce);
        if (threadIdx.x == 0) tokens[r] = token_of(best);
        return;
    }
    if (scratch == nullptr) {
        if (threadIdx.x == 0) tokens[r] = -1;
        return;
    }
    // The keys of the scaled logits, computed once (a division and a bit transform per value:
    // the selects' passes were instruction-bound recomputing them).
    uint64_t* keys = scratch + r * 2 * vocab;
    uint64_t* w = keys + vocab;
    const float temperature = choice.temperature;
    uint64_t best_key = 0;
    for_each_value(row, vocab, [&](int64_t i, float v) {
        const uint64_t key = device_selection_key(v / temperature, i);
        keys[i] = key;
        best_key = umax(best_key, key);
    });
    best_key = block_reduce<false>(best_key, sh.reduce);  // also publishes keys to the block
    const int32_t best_token = token_of(best_key);
    const float best = row[best_token] / temperature;
    if (!isfinite(best)) {  // +inf, or nothing finite: the first candidate
        if (threadIdx.x == 0) tokens[r] = best_token;
        return;
    }

    // Top-k: the kept candidates are those with key ≥ the k-th largest key.
    uint64_t kept_floor = 0;
    if (choice.top_k > 0 && choice.top_k < vocab) {
        kept_floor = select_by_mass(
            vocab, 0, static_cast<uint64_t>(choice.top_k), keys,
            [](int64_t) { return uint64_t{1}; }, sh, histograms);
    }

    uint64_t total = 0;
    for_each_value(row, vocab, [&](int64_t i, float v) {
        const uint64_t weight =
            keys[i] >= kept_floor ? device_selection_weight(v / temperature, best) : 0;
        w[i] = weight;
        total += weight;
    });
    total = block_reduce<true>(total, sh.reduce);
    const auto weight_of = [&](int64_t i) { return w[i]; };

    // Top-p: the nucleus is the kept candidates down to the one where the weight reaches the
    // target. Writes to w above are visible: select_by_mass synchronizes before reading.
    uint64_t nucleus_floor = kept_floor;
    uint64_t nucleus_total = total;
    if (choice.top_p < 1.0F) {
        nucleus_floor = select_by_mass(vocab, kept_floor, device_top_p_target(choice.top_p, total),
                                       keys, weight_of, sh, histograms);
        uint64_t sum = 0;
        for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
            if (keys[i] >= nucleus_floor) sum += w[i];
        }
        nucleus_total = block_reduce<true>(sum, sh.reduce);
    }

    // The draw: the first nucleus candidate whose cumulative weight exceeds d.
    const uint64_t draw = device_draw_threshold(choice.u, nucleus_total);
    const uint64_t picked =
        select_by_mass(vocab, nucleus_floor, draw + 1, keys, weight_of, sh, histograms);
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
        CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(token_select_kernel,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kHistogramBytes)));
        return true;
    }();
    (void)configured;
    launch_dependent(token_select_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(kThreads),
                     kHistogramBytes, static_cast<cudaStream_t>(stream), logits, vocab, choices,
                     scratch, tokens);
}

}  // namespace cherenkov::engine::cuda
