// Token selection kernels (token_select.h): one block per row. Every decision is "the largest
// selection key of a set" or "the largest key whose cumulative integer weight (in key order)
// reaches a target", found by a block reduction or an 8-pass radix select over 64-bit keys, the
// same integers engine/model/token_selector.cpp computes on the host. The kernel waits for the
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
// Dynamic shared memory: one digit histogram per warp. A single block-wide histogram serialized
// the atomics: most candidates share a few top digits (the float exponent), so a pass was ~vocab
// same-address atomics in a row (sampled decode at half the greedy rate on the 4-layer store).
constexpr size_t kHistogramBytes = sizeof(unsigned long long) * kWarps * kDigits;

struct SelectShared {
    uint64_t reduce[kWarps];
    uint64_t prefix;
    uint64_t remaining;
};

// The largest key k among the keys ≥ floor such that the candidates with key ≥ k weigh at least
// `target` (1 ≤ target ≤ the set's weight): the candidate where the cumulative weight, walked in
// key order, first reaches the target. mass(i, key) is a candidate's weight (1 for top-k counts).
// Eight passes of 8 bits from the high byte; bucket weights are integer atomics into per-warp
// histograms (`histograms`: kWarps × kDigits), added up per digit afterwards, so exact.
template <typename KeyOf, typename Mass>
__device__ uint64_t select_by_mass(int64_t vocab, uint64_t floor, uint64_t target,
                                   const KeyOf& key_of, const Mass& mass, SelectShared& sh,
                                   unsigned long long* histograms) {
    uint64_t prefix = 0;
    uint64_t mask = 0;
    uint64_t remaining = target;
    unsigned long long* mine = histograms + (threadIdx.x >> 5) * kDigits;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < kWarps * kDigits; d += blockDim.x) histograms[d] = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
            const uint64_t key = key_of(i);
            if (key < floor || (key & mask) != prefix) continue;
            const uint64_t m = mass(i, key);
            if (m != 0) {
                atomicAdd(&mine[(key >> shift) & 0xFF], static_cast<unsigned long long>(m));
            }
        }
        __syncthreads();
        // Digit d's total into warp 0's histogram (thread d alone touches column d).
        for (int d = threadIdx.x; d < kDigits; d += blockDim.x) {
            unsigned long long sum = 0;
            for (int w = 0; w < kWarps; ++w) sum += histograms[w * kDigits + d];
            histograms[d] = sum;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            uint64_t above = 0;  // weight of the matching keys with a larger digit
            int digit = 255;
            while (digit > 0 && above + histograms[digit] < remaining) above += histograms[digit--];
            sh.prefix = prefix | (static_cast<uint64_t>(digit) << shift);
            sh.remaining = remaining - above;
        }
        __syncthreads();
        prefix = sh.prefix;
        remaining = sh.remaining;
        mask |= uint64_t{0xFF} << shift;
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

// grid n_rows, kThreads threads. weights: [n_rows, vocab] or null (greedy rows only).
__global__ void token_select_kernel(const float* logits, int64_t vocab, const TokenChoice* choices,
                                    uint64_t* weights, int32_t* tokens) {
    __shared__ SelectShared sh;
    extern __shared__ unsigned long long histograms[];  // kHistogramBytes
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t r = blockIdx.x;
    const float* row = logits + r * vocab;
    const TokenChoice choice = choices[r];

    if (choice.temperature <= 0.0F) {  // greedy: the largest key of the raw logits
        uint64_t best = 0;
        for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
            best = umax(best, device_selection_key(row[i], i));
        best = block_reduce<false>(best, sh.reduce);
        if (threadIdx.x == 0) tokens[r] = token_of(best);
        return;
    }
    if (weights == nullptr) {
        if (threadIdx.x == 0) tokens[r] = -1;
        return;
    }
    uint64_t* w = weights + r * vocab;
    const float temperature = choice.temperature;
    const auto key_of = [&](int64_t i) { return device_selection_key(row[i] / temperature, i); };

    // Top-k: the kept candidates are those with key ≥ the k-th largest key.
    uint64_t kept_floor = 0;
    if (choice.top_k > 0 && choice.top_k < vocab) {
        kept_floor = select_by_mass(
            vocab, 0, static_cast<uint64_t>(choice.top_k), key_of,
            [](int64_t, uint64_t) { return uint64_t{1}; }, sh, histograms);
    }

    uint64_t best_key = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) best_key = umax(best_key, key_of(i));
    best_key = block_reduce<false>(best_key, sh.reduce);
    const int32_t best_token = token_of(best_key);
    const float best = row[best_token] / temperature;
    if (!isfinite(best)) {  // +inf, or nothing finite: the first candidate
        if (threadIdx.x == 0) tokens[r] = best_token;
        return;
    }

    uint64_t total = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float s = row[i] / temperature;
        const uint64_t weight =
            device_selection_key(s, i) >= kept_floor ? device_selection_weight(s, best) : 0;
        w[i] = weight;
        total += weight;
    }
    total = block_reduce<true>(total, sh.reduce);
    const auto weight_of = [&](int64_t i, uint64_t) { return w[i]; };

    // Top-p: the nucleus is the kept candidates down to the one where the weight reaches the
    // target. Writes to w above are visible: select_by_mass synchronizes before reading.
    uint64_t nucleus_floor = kept_floor;
    uint64_t nucleus_total = total;
    if (choice.top_p < 1.0F) {
        nucleus_floor = select_by_mass(vocab, kept_floor, device_top_p_target(choice.top_p, total),
                                       key_of, weight_of, sh, histograms);
        uint64_t sum = 0;
        for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
            if (key_of(i) >= nucleus_floor) sum += w[i];
        }
        nucleus_total = block_reduce<true>(sum, sh.reduce);
    }

    // The draw: the first nucleus candidate whose cumulative weight exceeds d.
    const uint64_t draw = device_draw_threshold(choice.u, nucleus_total);
    const uint64_t picked =
        select_by_mass(vocab, nucleus_floor, draw + 1, key_of, weight_of, sh, histograms);
    if (threadIdx.x == 0) tokens[r] = token_of(picked);
}

}  // namespace

void token_select(const float* logits, int64_t n_rows, int64_t vocab, const TokenChoice* choices,
                  uint64_t* weights, int32_t* tokens, void* stream) {
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
                     weights, tokens);
}

}  // namespace cherenkov::engine::cuda
