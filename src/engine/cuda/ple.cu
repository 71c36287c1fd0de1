// Per-layer n-gram embeddings on the GPU (docs/qwen4_exp.md §3.4), as engine/model/ple.cpp. The
// n-gram rows are gathered and dequantized on the host (the table never leaves host memory) and
// arrive here as `embedding` [T, P]. Kernels wait for the previous kernel before touching memory
// and are launched with launch_dependent (dependent_launch.cuh).
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kGateThreads = 256;

// One block per (row t, stream s): the stream's gate from the normalized key and query, then
// gated[t, s·H + d] = gate · value[t, d]. A row that fits a row slice is loaded before anything
// is computed (load_row_slice); both forms add the products in the same order.
__device__ __forceinline__ float ple_gate_of(float dot, int64_t hidden) {
    const float g = dot * (1.0F / sqrtf(static_cast<float>(hidden)));
    float signed_root = 0.0F;
    if (g != 0.0F) signed_root = copysignf(sqrtf(fmaxf(fabsf(g), 1e-6F)), g);
    return sigmoid_f(signed_root);
}

__global__ void ple_gate_kernel(const float* keys, const float* query, const float* value,
                                int64_t n_streams, int64_t hidden, float* gated) {
    __shared__ float partial[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const int64_t s = blockIdx.y;
    const int64_t width = n_streams * hidden;
    const float* k = keys + t * width + s * hidden;
    const float* q = query + t * width + s * hidden;
    const float* v = value + t * hidden;
    float* out = gated + t * width + s * hidden;
    if (row_fits_slice(hidden)) {
        float kv[kRowSlice];
        float qv[kRowSlice];
        float vv[kRowSlice];
        load_row_slice(k, hidden, kv);
        load_row_slice(q, hidden, qv);
        load_row_slice(v, hidden, vv);
        float dot = 0.0F;
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) dot += kv[j] * qv[j];  // zeros past the row add 0
        const float gate = ple_gate_of(block_sum(dot, partial), hidden);
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) {
            const int64_t d = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
            if (d >= hidden) break;
            out[d] = gate * vv[j];
        }
        return;
    }
    float dot = 0.0F;
    for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) dot += k[d] * q[d];
    const float gate = ple_gate_of(block_sum(dot, partial), hidden);
    for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) out[d] = gate * v[d];
}

// out = gated + silu(dilated causal conv over hist); x += out. hist rows: `history` from the
// state, then the call's rows.
__global__ void ple_conv_kernel(const float* hist, const float* gated, const float* conv,
                                int64_t n_rows, int64_t width, int64_t history, int64_t taps,
                                int64_t dilation, float* out, float* x) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t total = n_rows * width;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = i / width;
        const int64_t ch = i % width;
        const int64_t now = history + t;
        float sum = 0.0F;
        for (int64_t j = 0; j < taps; ++j) {
            const int64_t row = now - (taps - 1 - j) * dilation;
            sum += conv[ch * taps + j] * hist[row * width + ch];
        }
        const float o = gated[i] + silu_f(sum);
        out[i] = o;
        x[i] += o;
    }
}

}  // namespace

void ple_forward(const DevicePleWeights& weights, DevicePleState& state, const float* embedding,
                 float* x, int64_t n_rows, const DeviceContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    const int64_t p_dim = c.ple_embed_dim;
    const int64_t history = c.ple_conv_state_len;  // (Kp-1)·N
    cudaStream_t s = ctx.stream;
    ctx.record("ple.embedding", embedding, n_rows * p_dim);

    DeviceScratch<float> keys(static_cast<size_t>(n_rows * width), s);
    linear_apply(weights.key, embedding, n_rows, keys.data(), s);
    DeviceScratch<float> value(static_cast<size_t>(n_rows * h), s);
    linear_apply(weights.value, embedding, n_rows, value.data(), s);
    rms_norm_rows(keys.data(), weights.norm_key, n_rows, width, h, ctx.eps(), keys.data(), s);
    DeviceScratch<float> query(static_cast<size_t>(n_rows * width), s);
    rms_norm_rows(x, weights.norm_query, n_rows, width, h, ctx.eps(), query.data(), s);

    DeviceScratch<float> gated(static_cast<size_t>(n_rows * width), s);
    const dim3 gate_grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_streams));
    launch_dependent(ple_gate_kernel, gate_grid, dim3(kGateThreads), 0, s, keys.data(),
                     query.data(), value.data(), n_streams, h, gated.data());

    // hist = [the state's rows ; this call's normalized gated rows]
    const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
    DeviceScratch<float> hist(static_cast<size_t>((history + n_rows) * width), s);
    CHERENKOV_CUDA_CHECK(
        cudaMemcpyAsync(hist.data(), state.conv, history * row_bytes, cudaMemcpyDeviceToDevice, s));
    rms_norm_rows(gated.data(), weights.norm_conv, n_rows, width, h, ctx.eps(),
                  hist.data() + history * width, s);

    DeviceScratch<float> out(static_cast<size_t>(n_rows * width), s);
    launch_dependent(ple_conv_kernel, dim3(elementwise_blocks(n_rows * width)), dim3(256), 0, s,
                     hist.data(), gated.data(), weights.conv, n_rows, width, history,
                     c.ple_conv_kernel_size, c.ngram_size, out.data(), x);

    if (ctx.ple_conv_snapshots != nullptr) {
        // After row t the state is hist rows [t+1, t+1+history) (verification: T ≤ 4).
        for (int64_t t = 0; t < n_rows; ++t) {
            CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(ctx.ple_conv_snapshots + t * history * width,
                                                 hist.data() + (t + 1) * width, history * row_bytes,
                                                 cudaMemcpyDeviceToDevice, s));
        }
    }
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(state.conv, hist.data() + n_rows * width,
                                         history * row_bytes, cudaMemcpyDeviceToDevice, s));
    ctx.record("ple.out", out.data(), n_rows * width);
}

}  // namespace cherenkov::engine::cuda
