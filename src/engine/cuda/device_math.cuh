// Scalar math shared by the CUDA kernels, matching engine/model/ops.h (docs/qwen4_exp.md §3.0)
// operation for operation, so device results stay within float rounding of the CPU reference.
#pragma once

#include <cuda_runtime.h>

namespace cherenkov::engine::cuda {

__device__ __forceinline__ float sigmoid_f(float x) {
    return 1.0F / (1.0F + expf(-x));
}
__device__ __forceinline__ float silu_f(float x) {
    return x / (1.0F + expf(-x));
}
// PyTorch's softplus returns x above 20.
__device__ __forceinline__ float softplus_f(float x) {
    return x > 20.0F ? x : log1pf(expf(x));
}

// Sum over a warp; every lane gets the total. The butterfly order is fixed, so results are
// reproducible run to run.
__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffU, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffU, v, offset));
    return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets
// the total. `shared` holds at least 32 floats. Contains __syncthreads: call from all threads.
__device__ __forceinline__ float block_sum(float v, float* shared) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // `shared` may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < n_warps ? shared[lane] : 0.0F;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* shared) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < n_warps ? shared[lane] : -INFINITY;
    return warp_max(v);
}

// A block's share of a row held in registers: element threadIdx.x + j·blockDim.x in v[j], zero
// past n. Every load is issued before any is used. Why: a loop that loads, computes and stores
// one element at a time waits a memory round trip per iteration (the compiler may not move a
// load above a store that could alias it), and a single-block row kernel over 2560 values took
// ~10 µs that way. Rows longer than kRowSlice · blockDim.x take the kernels' loops instead.
constexpr int kRowSlice = 16;

__device__ __forceinline__ bool row_fits_slice(int64_t n) {
    return n <= static_cast<int64_t>(kRowSlice) * blockDim.x;
}

__device__ __forceinline__ void load_row_slice(const float* src, int64_t n, float (&v)[kRowSlice]) {
#pragma unroll
    for (int j = 0; j < kRowSlice; ++j) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
        v[j] = i < n ? src[i] : 0.0F;
    }
}

// NeoX rotate-half RoPE of pair (i, i + half) at `position` with the model's inv_freq table
// (engine::Rope: angle = float(p)·inv_freq[i] in float32). Returns the rotated pair.
__device__ __forceinline__ float2 rope_pair(float a, float b, float inv_freq, int64_t position) {
    const float angle = static_cast<float>(position) * inv_freq;
    float s;
    float c;
    sincosf(angle, &s, &c);
    return make_float2(a * c - b * s, b * c + a * s);
}

}  // namespace cherenkov::engine::cuda
