// Hyper-connection mix on the GPU (docs/qwen4_exp.md §3.3), as engine/model/hyper_connection.cpp.
// Kernels wait for the previous kernel before touching memory and are launched with
// launch_dependent (dependent_launch.cuh).
#include "engine/cuda/affine_gemv_bulk.h"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

// v = silu(v / C) over n values (the low-rank down projection's activation).
__global__ void scaled_silu_kernel(float* v, int64_t n, float inv_streams) {
    wait_for_previous_kernel();
    allow_next_kernel();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        v[i] = silu_f(v[i] * inv_streams);
    }
}

// mix[t, d] = (Σ_s sigmoid(gates[t, s·H + d]) · normed[t, s·H + d]) / C
__global__ void mix_kernel(const float* gates, const float* normed, int64_t n_rows,
                           int64_t n_streams, int64_t hidden, float inv_streams, float* mix) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t total = n_rows * hidden;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = i / hidden;
        const int64_t d = i % hidden;
        const int64_t base = t * n_streams * hidden + d;
        float sum = 0.0F;
#pragma unroll 4  // the streams' loads issued together (C = 4 in the models)
        for (int64_t s = 0; s < n_streams; ++s) {
            sum += sigmoid_f(gates[base + s * hidden]) * normed[base + s * hidden];
        }
        mix[i] = sum * inv_streams;
    }
}

// w = 2·sigmoid(w / C)
__global__ void inject_kernel(float* w, int64_t n, float inv_streams) {
    wait_for_previous_kernel();
    allow_next_kernel();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        w[i] = 2.0F * sigmoid_f(w[i] * inv_streams);
    }
}

// Whether the up projection can take silu(down / C) as it reads its input (the bulk GEMV on
// Hopper, decode rows, no bias): then the activation is not a launch of its own.
bool silu_on_up_input(const DeviceLinear& up, int64_t n_rows) {
    return up.quantized && up.bias == nullptr && n_rows <= kMaxGemvRows &&
           bulk_gemv_takes(up.affine.bits, up.affine.group_size, up.affine.rows, up.affine.cols,
                           static_cast<int>(n_rows));
}

}  // namespace

void hyper_connection_mix(const DeviceHyperConnectionWeights& weights, const float* x,
                          int64_t n_rows, const DeviceContext& ctx, float* mix, float* inject) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    const int64_t rank = c.hc_lowrank;
    const float inv_streams = 1.0F / static_cast<float>(n_streams);
    cudaStream_t s = ctx.stream;

    DeviceScratch<float> normed(static_cast<size_t>(n_rows * width), s);
    rms_norm_rows(x, weights.norm, n_rows, width, h, ctx.eps(), normed.data(), s);
    // The inject projection reads only `normed`: a side stream runs it beside the gate chain.
    const bool with_inject = inject != nullptr && weights.has_inject;
    const SideStreams* side = with_inject && ctx.trace == nullptr ? ctx.side : nullptr;
    if (side != nullptr) side->fork(s, 1);
    if (with_inject) {
        const cudaStream_t is = side != nullptr ? side->get(0) : s;
        linear_apply(weights.inject, normed.data(), n_rows, inject, is);
        launch_dependent(inject_kernel, dim3(elementwise_blocks(n_rows * n_streams)), dim3(256), 0,
                         is, inject, n_rows * n_streams, inv_streams);
    }
    DeviceScratch<float> down(static_cast<size_t>(n_rows * rank), s);
    linear_apply(weights.down, normed.data(), n_rows, down.data(), s);
    DeviceScratch<float> gates(static_cast<size_t>(n_rows * width), s);
    if (silu_on_up_input(weights.up, n_rows)) {  // one launch less on the mix's chain
        bulk_gemv_dense(weights.up.affine, down.data(), static_cast<size_t>(rank),
                        static_cast<int>(n_rows), gates.data(), static_cast<size_t>(width), s,
                        inv_streams);
    } else {
        launch_dependent(scaled_silu_kernel, dim3(elementwise_blocks(n_rows * rank)), dim3(256), 0,
                         s, down.data(), n_rows * rank, inv_streams);
        linear_apply(weights.up, down.data(), n_rows, gates.data(), s);
    }
    launch_dependent(mix_kernel, dim3(elementwise_blocks(n_rows * h)), dim3(256), 0, s,
                     gates.data(), normed.data(), n_rows, n_streams, h, inv_streams, mix);
    if (side != nullptr) side->join(s, 1);
}

}  // namespace cherenkov::engine::cuda
