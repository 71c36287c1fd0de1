// Norms, the hyper-connection combine and trace capture for the CUDA forward pass
// (device_layers.cuh), matching engine/model/ops.cpp. Kernels wait for the previous kernel before
// touching memory and are launched with launch_dependent (dependent_launch.cuh).
#include <vector>

#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kNormThreads = 256;

// One block per (row, group): y = x / sqrt(mean(x²) + eps) · w, then, with a gate z (laid out
// like x), y *= sigmoid(z) or silu(z). y may be x. A group that fits a row slice is loaded once,
// with its weights and gate, before anything is computed (load_row_slice); longer groups loop.
// Both forms add the squares in the same order.
__device__ __forceinline__ float gated_norm_value(float x, float inv, float w, bool gated, float z,
                                                  bool sigmoid_gate) {
    const float v = x * inv * w;
    return gated ? v * (sigmoid_gate ? sigmoid_f(z) : silu_f(z)) : v;
}

__global__ void rms_norm_kernel(const float* x, const float* w, int64_t n, int64_t group, float eps,
                                float* y, const float* gate, bool sigmoid_gate) {
    __shared__ float partial[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t row = blockIdx.x;
    const int64_t start = row * n + static_cast<int64_t>(blockIdx.y) * group;
    const float* xr = x + start;
    const float* wr = w != nullptr ? w + static_cast<int64_t>(blockIdx.y) * group : nullptr;
    float* yr = y + start;
    const float* zr = gate != nullptr ? gate + start : nullptr;
    if (row_fits_slice(group)) {
        float xv[kRowSlice];
        float wv[kRowSlice];
        float zv[kRowSlice];
        load_row_slice(xr, group, xv);
        if (wr != nullptr) load_row_slice(wr, group, wv);
        if (zr != nullptr) load_row_slice(zr, group, zv);
        float sum = 0.0F;
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) sum += xv[j] * xv[j];  // zeros past the group add 0
        sum = block_sum(sum, partial);
        const float inv = 1.0F / sqrtf(sum / static_cast<float>(group) + eps);
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) {
            const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
            if (i >= group) break;
            yr[i] = gated_norm_value(xv[j], inv, wr != nullptr ? wv[j] : 1.0F, zr != nullptr,
                                     zr != nullptr ? zv[j] : 0.0F, sigmoid_gate);
        }
        return;
    }
    float sum = 0.0F;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) sum += xr[i] * xr[i];
    sum = block_sum(sum, partial);
    const float inv = 1.0F / sqrtf(sum / static_cast<float>(group) + eps);
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
        yr[i] = gated_norm_value(xr[i], inv, wr != nullptr ? wr[i] : 1.0F, zr != nullptr,
                                 zr != nullptr ? zr[i] : 0.0F, sigmoid_gate);
    }
}

// The same norm for groups of at most kNormThreads values, one warp per (row, group) and
// kNormWarps groups per block: the GDN's gated head norm of a prefill chunk is 48 heads × rows
// groups of 128, which rms_norm_kernel ran as that many 256-thread blocks (197 µs for 512 rows
// on an H200, against ~10 µs of memory traffic). Same bits as rms_norm_kernel: lane l holds the
// values thread 32·w + l held there (w < kNormThreads / 32, "virtual warp" w), each virtual
// warp's squares are summed by the same butterfly, and the per-warp sums s_w then meet as
// rms_norm_kernel's second butterfly adds them over lanes 0-7: ((s0 + s4) + (s2 + s6)) +
// ((s1 + s5) + (s3 + s7)) (its first two rounds add zeros, which changes nothing).
constexpr int kNormVirtualWarps = kNormThreads / 32;
constexpr int kNormWarps = 8;

__global__ void rms_norm_warp_kernel(const float* x, const float* w, int64_t n, int64_t group,
                                     int64_t n_items, float eps, float* y, const float* gate,
                                     bool sigmoid_gate) {
    static_assert(kNormVirtualWarps == 8, "the butterfly below is rms_norm_kernel's for 8 warps");
    wait_for_previous_kernel();
    allow_next_kernel();
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int64_t item = static_cast<int64_t>(blockIdx.x) * kNormWarps + (threadIdx.x >> 5);
    if (item >= n_items) return;  // warp-uniform
    const int64_t groups_per_row = n / group;
    const int64_t row = item / groups_per_row;
    const int64_t g = item - row * groups_per_row;
    const int64_t start = row * n + g * group;
    const float* xr = x + start;
    const float* wr = w != nullptr ? w + g * group : nullptr;
    const float* zr = gate != nullptr ? gate + start : nullptr;
    float v[kNormVirtualWarps];
    float s[kNormVirtualWarps];
#pragma unroll
    for (int k = 0; k < kNormVirtualWarps; ++k) {
        const int64_t i = 32 * k + lane;
        v[k] = i < group ? xr[i] : 0.0F;
        // Rounded before the butterfly, as rms_norm_kernel's 0 + x·x is (never fused into its
        // first add).
        s[k] = warp_sum(__fmul_rn(v[k], v[k]));
    }
    const float sum = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    const float inv = 1.0F / sqrtf(sum / static_cast<float>(group) + eps);
    float* yr = y + start;
#pragma unroll
    for (int k = 0; k < kNormVirtualWarps; ++k) {
        const int64_t i = 32 * k + lane;
        if (i >= group) break;
        yr[i] = gated_norm_value(v[k], inv, wr != nullptr ? wr[i] : 1.0F, zr != nullptr,
                                 zr != nullptr ? zr[i] : 0.0F, sigmoid_gate);
    }
}

__global__ void combine_kernel(float* x, const float* inject, const float* y, int64_t n_rows,
                               int64_t n_streams, int64_t hidden) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t total = n_rows * n_streams * hidden;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t d = i % hidden;
        const int64_t ts = i / hidden;  // t·C + s
        const int64_t t = ts / n_streams;
        x[i] += inject[ts] * y[t * hidden + d];
    }
}

}  // namespace

int elementwise_blocks(int64_t n) {
    const int64_t blocks = (n + 255) / 256;
    return static_cast<int>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

void rms_norm_rows(const float* x, const float* w, int64_t n_rows, int64_t n, int64_t group,
                   float eps, float* y, cudaStream_t stream) {
    gated_rms_norm_rows(x, w, nullptr, false, n_rows, n, group, eps, y, stream);
}

void gated_rms_norm_rows(const float* x, const float* w, const float* gate, bool sigmoid_gate,
                         int64_t n_rows, int64_t n, int64_t group, float eps, float* y,
                         cudaStream_t stream) {
    if (n_rows == 0) return;
    if (group <= 0 || n % group != 0) {
        throw_internal("[rms_norm_rows] width " + std::to_string(n) +
                       " is not a multiple of the group " + std::to_string(group));
    }
    if (group <= kNormThreads) {
        const int64_t n_items = n_rows * (n / group);
        launch_dependent(rms_norm_warp_kernel,
                         dim3(static_cast<unsigned>((n_items + kNormWarps - 1) / kNormWarps)),
                         dim3(32 * kNormWarps), 0, stream, x, w, n, group, n_items, eps, y, gate,
                         sigmoid_gate);
        return;
    }
    const dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n / group));
    launch_dependent(rms_norm_kernel, grid, dim3(kNormThreads), 0, stream, x, w, n, group, eps, y,
                     gate, sigmoid_gate);
}

void hyper_connection_combine(float* x, const float* inject, const float* y, int64_t n_rows,
                              int64_t n_streams, int64_t hidden, cudaStream_t stream) {
    if (n_rows == 0) return;
    launch_dependent(combine_kernel, dim3(elementwise_blocks(n_rows * n_streams * hidden)),
                     dim3(256), 0, stream, x, inject, y, n_rows, n_streams, hidden);
}

void DeviceContext::record(const char* name, const float* device_data, int64_t n) const {
    if (trace == nullptr) return;
    std::vector<float> host(static_cast<size_t>(n));
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(host.data(), device_data, host.size() * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream));
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream));
    trace->record(trace_prefix + name, host.data(), n);
}

}  // namespace cherenkov::engine::cuda
