// Gated DeltaNet on the GPU (docs/qwen4_exp.md §3.5), step for step as the CPU reference
// engine/model/gated_deltanet.cpp: projections, causal conv + SiLU, q/k l2 norms, the delta-rule
// recurrence, the gated RMS norm and the out projection. All float32. The recurrence runs token
// by token (below) for decode and verification calls, which need per-row snapshots, and for
// short calls; prefill calls of kMinChunkedRows rows or more without snapshots use the chunked
// form of delta_rule_chunked.cu instead, equal up to float rounding. Decode calls (≤ 4 rows) run
// the conv on the conv state in place (conv_step_kernel); longer calls copy it into a history
// buffer and back.
// The recurrence keeps each thread's slice of S [dk, dv] in registers across the rows: a block
// owns one value head and 32 value columns (one per lane, so state loads are coalesced), its 8
// warps split the dk key rows, and the sums over dk are combined through shared memory in warp
// order (fixed, so results are reproducible). Splitting along v keeps the grid wide (Hv·dv/32
// blocks) without any cross-block synchronization (docs/qwen4_exp.md §3.5).
// Kernels wait for the previous kernel before touching memory and are launched with
// launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/delta_rule_chunked.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

using model_data::qwen4_exp::GateActivation;

constexpr int kElementwiseThreads = 256;
constexpr int kCols = 32;        // value columns per recurrence block: lane = column
constexpr int kKeySplit = 8;     // warps per recurrence block, each owning dk / 8 key rows
constexpr float kL2Eps = 1e-6F;  // engine::l2_normalize: x / sqrt(Σx² + 1e-6)
constexpr int kMaxStepTaps = 8;  // conv_step_kernel's window: taps − 1 + kMaxGemvRows values
// Calls of at least this many rows (and no snapshots) take the chunked recurrence. Chosen without
// measuring: the token-by-token kernel's time grows with the rows (three block barriers and a
// dependent global load per row), while the chunked one costs two launches and, per 64-row
// chunk, about as much latency as a few rows; 16 is well past that break-even, and decode and
// verification calls (at most 4 rows) stay on the token-by-token kernel either way.
constexpr int64_t kMinChunkedRows = 16;

unsigned blocks_for(int64_t n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

// out[t, ch] = silu(Σ_j w[ch, j] · hist[t + j, ch]) for t < n_rows, ch < conv_dim.
// hist: [Kc-1 + n_rows, conv_dim]; w: [conv_dim, Kc]; out: [n_rows, conv_dim].
__global__ void conv_silu_kernel(const float* __restrict__ hist, const float* __restrict__ w,
                                 int64_t n_rows, int64_t conv_dim, int taps,
                                 float* __restrict__ out) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (index >= n_rows * conv_dim) return;
    const int64_t t = index / conv_dim;
    const int64_t ch = index % conv_dim;
    float sum = 0.0F;
    for (int j = 0; j < taps; ++j) sum += w[ch * taps + j] * hist[(t + j) * conv_dim + ch];
    out[index] = silu_f(sum);
}

// conv_silu_kernel for decode calls (n_rows ≤ kMaxGemvRows, taps ≤ kMaxStepTaps) without the
// history copies around it: one thread per channel holds the window [the state's taps−1 rows ;
// the call's rows], writes out as conv_silu_kernel does (the same sums in the same order), each
// row's snapshot of the state (when `snapshots` is not null: [T, (taps−1)·conv_dim]) and the
// state after the last row, in place (a channel's state is read and written by its thread only).
// state: [taps−1, conv_dim]; rows: [n_rows, conv_dim]; w: [conv_dim, taps]; out: [n_rows,
// conv_dim].
__global__ void conv_step_kernel(float* state, const float* __restrict__ rows,
                                 const float* __restrict__ w, int n_rows, int64_t conv_dim,
                                 int taps, float* __restrict__ out, float* __restrict__ snapshots) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (ch >= conv_dim) return;
    const int kept = taps - 1;
    float window[kMaxStepTaps - 1 + kMaxGemvRows];
    for (int j = 0; j < kept; ++j) window[j] = state[j * conv_dim + ch];
    for (int t = 0; t < n_rows; ++t) window[kept + t] = rows[t * conv_dim + ch];
    for (int t = 0; t < n_rows; ++t) {
        float sum = 0.0F;
        for (int j = 0; j < taps; ++j) sum += w[ch * taps + j] * window[t + j];
        out[t * conv_dim + ch] = silu_f(sum);
        if (snapshots != nullptr) {
            for (int j = 0; j < kept; ++j)
                snapshots[(t * kept + j) * conv_dim + ch] = window[t + 1 + j];
        }
    }
    for (int j = 0; j < kept; ++j) state[j * conv_dim + ch] = window[n_rows + j];
}

// In place on conv [n_rows, conv_dim]: the 2·Hk head vectors of dk values at the start of each
// row (q heads, then k heads) are l2-normalized; q heads are then scaled by q_scale. One warp per
// (row = blockIdx.x, head vector = blockIdx.y).
__global__ void qk_l2_norm_kernel(float* __restrict__ conv, int64_t conv_dim, int64_t n_key_heads,
                                  int dk, float q_scale) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int lane = static_cast<int>(threadIdx.x);
    const int64_t head_vector = blockIdx.y;  // < 2·Hk
    float* x = conv + static_cast<int64_t>(blockIdx.x) * conv_dim + head_vector * dk;
    float sum = 0.0F;
    for (int i = lane; i < dk; i += 32) sum += x[i] * x[i];
    sum = warp_sum(sum);
    const float inv = 1.0F / sqrtf(sum + kL2Eps);
    const bool is_q = head_vector < n_key_heads;
    for (int i = lane; i < dk; i += 32) {
        float v = x[i] * inv;
        if (is_q) v = v * q_scale;
        x[i] = v;
    }
}

// Grid (Hv, ceil(dv / kCols)), kCols·kKeySplit threads. Thread (warp w, lane c) owns S[i][col]
// for i in [w·kRows, (w+1)·kRows) and col = blockIdx.y·kCols + c. Per row t, as the CPU does:
//   S *= g;  u = β·(v − Sᵀk);  S += k ⊗ u;  o = Sᵀq
// with g = exp(−exp(a_log)·softplus(a + dt_bias)) and β = sigmoid(b).
template <int kRows>
__global__ void __launch_bounds__(kCols* kKeySplit) delta_rule_kernel(const DeltaRuleParams p) {
    constexpr int kDk = kRows * kKeySplit;
    __shared__ float q_shared[kDk];
    __shared__ float k_shared[kDk];
    __shared__ float u_parts[kKeySplit][kCols];
    __shared__ float o_parts[kKeySplit][kCols];
    wait_for_previous_kernel();
    allow_next_kernel();

    const int lane = static_cast<int>(threadIdx.x) % kCols;
    const int split = static_cast<int>(threadIdx.x) / kCols;
    const int64_t head = blockIdx.x;
    const int64_t key_head = head / p.head_ratio;
    const int64_t col = static_cast<int64_t>(blockIdx.y) * kCols + lane;
    const bool active = col < p.dv;
    const int first_key = split * kRows;
    const int64_t head_size = int64_t{kDk} * p.dv;
    const int64_t value_dim = p.n_value_heads * p.dv;

    float s[kRows];
    float* state = p.state + head * head_size;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        s[r] = active ? state[(first_key + r) * p.dv + col] : 0.0F;
    }
    const float a_scale = expf(p.a_log[head]);
    const float dt_bias = p.dt_bias[head];

    for (int64_t t = 0; t < p.n_rows; ++t) {
        const float* row = p.conv + t * p.conv_dim;
        __syncthreads();  // the previous row is done with q_shared, k_shared and o_parts
        for (int i = static_cast<int>(threadIdx.x); i < kDk; i += blockDim.x) {
            q_shared[i] = row[key_head * kDk + i];
            k_shared[i] = row[p.key_dim + key_head * kDk + i];
        }
        __syncthreads();

        const float decay = -a_scale * softplus_f(p.a_raw[t * p.n_value_heads + head] + dt_bias);
        const float g = expf(decay);
        const float beta = sigmoid_f(p.b_raw[t * p.n_value_heads + head]);

        float partial = 0.0F;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            s[r] *= g;
            partial += s[r] * k_shared[first_key + r];
        }
        u_parts[split][lane] = partial;
        __syncthreads();
        float sk = 0.0F;
#pragma unroll
        for (int w = 0; w < kKeySplit; ++w) sk += u_parts[w][lane];
        const float v = active ? row[2 * p.key_dim + head * p.dv + col] : 0.0F;
        const float u = beta * (v - sk);

        partial = 0.0F;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            s[r] += k_shared[first_key + r] * u;
            partial += s[r] * q_shared[first_key + r];
        }
        o_parts[split][lane] = partial;
        __syncthreads();
        if (!active) continue;
        if (split == 0) {
            float o = 0.0F;
#pragma unroll
            for (int w = 0; w < kKeySplit; ++w) o += o_parts[w][lane];
            p.heads[t * value_dim + head * p.dv + col] = o;
        }
        if (p.snapshots != nullptr) {
            float* snap = p.snapshots + t * p.n_value_heads * head_size + head * head_size;
#pragma unroll
            for (int r = 0; r < kRows; ++r) snap[(first_key + r) * p.dv + col] = s[r];
        }
    }

    if (!active) return;
#pragma unroll
    for (int r = 0; r < kRows; ++r) state[(first_key + r) * p.dv + col] = s[r];
}

// out[t, m] = hist[(t + 1)·conv_dim + m] for m < (Kc-1)·conv_dim: the conv state after row t.
__global__ void conv_snapshot_kernel(const float* __restrict__ hist, int64_t n_rows,
                                     int64_t conv_dim, int64_t state_size,
                                     float* __restrict__ out) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (index >= n_rows * state_size) return;
    const int64_t t = index / state_size;
    const int64_t m = index % state_size;
    out[index] = hist[(t + 1) * conv_dim + m];
}

void launch_delta_rule(const DeltaRuleParams& params, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(params.n_value_heads), blocks_for(params.dv, kCols));
    const int threads = kCols * kKeySplit;
    const auto run = [&](auto kernel) {
        launch_dependent(kernel, grid, dim3(threads), 0, stream, params);
    };
    switch (params.dk) {
        case 8: run(delta_rule_kernel<1>); break;
        case 16: run(delta_rule_kernel<2>); break;
        case 32: run(delta_rule_kernel<4>); break;
        case 64: run(delta_rule_kernel<8>); break;
        case 128: run(delta_rule_kernel<16>); break;
        case 256: run(delta_rule_kernel<32>); break;
        default:
            throw_unsupported("[gated_deltanet] key head dim " + std::to_string(params.dk) +
                              " (supported: 8, 16, 32, 64, 128, 256)");
    }
}

// Scratch pieces start on 64-float (256-byte) boundaries, so GEMV inputs stay 16-byte aligned.
int64_t padded(int64_t n) {
    return (n + 63) / 64 * 64;
}

}  // namespace

void gated_deltanet_forward(const DeviceGatedDeltaNetWeights& weights,
                            DeviceGatedDeltaNetState& state, const float* mix, int64_t n_rows,
                            float* y, const DeviceContext& ctx) {
    if (n_rows <= 0) return;
    const auto& c = *ctx.config;
    const int64_t conv_dim = c.conv_dim;
    const int64_t taps = c.linear_conv_kernel_dim;
    const int64_t n_key_heads = c.linear_num_key_heads;
    const int64_t n_value_heads = c.linear_num_value_heads;
    const int64_t dk = c.linear_key_head_dim;
    const int64_t dv = c.linear_value_head_dim;
    const int64_t key_dim = c.key_dim;
    const int64_t value_dim = c.value_dim;
    const int64_t kept = taps - 1;
    const cudaStream_t stream = ctx.stream;
    CHERENKOV_ASSERT(taps >= 1 && n_key_heads > 0 && n_value_heads % n_key_heads == 0,
                     "GDN head counts");
    CHERENKOV_ASSERT(key_dim == n_key_heads * dk && value_dim == n_value_heads * dv &&
                         conv_dim == 2 * key_dim + value_dim,
                     "GDN derived dims");
    CHERENKOV_ASSERT(
        weights.in_qkv.out_features() == conv_dim && weights.in_z.out_features() == value_dim &&
            weights.in_b.out_features() == n_value_heads &&
            weights.in_a.out_features() == n_value_heads && weights.out.in_features() == value_dim,
        "GDN projection shapes");

    // One scratch allocation: hist [Kc-1 + T, conv_dim], z [T, value_dim], b and a [T, Hv],
    // conv [T, conv_dim], heads [T, value_dim].
    const int64_t hist_size = padded((kept + n_rows) * conv_dim);
    const int64_t z_size = padded(n_rows * value_dim);
    const int64_t gate_size = padded(n_rows * n_value_heads);
    const int64_t conv_size = padded(n_rows * conv_dim);
    DeviceScratch<float> scratch(
        static_cast<size_t>(hist_size + z_size + 2 * gate_size + conv_size + z_size), stream);
    float* hist = scratch.data();
    float* z = hist + hist_size;
    float* b_raw = z + z_size;
    float* a_raw = b_raw + gate_size;
    float* conv = a_raw + gate_size;
    float* heads = conv + conv_size;

    // hist = [the state's Kc-1 pre-conv rows ; this call's in_qkv rows]. Decode calls read the
    // state in place instead (conv_step_kernel): no copies in or out.
    const bool step = n_rows <= kMaxGemvRows && taps <= kMaxStepTaps;
    const auto state_bytes = static_cast<size_t>(kept * conv_dim) * sizeof(float);
    if (state_bytes > 0 && !step) {
        CHERENKOV_CUDA_CHECK(
            cudaMemcpyAsync(hist, state.conv, state_bytes, cudaMemcpyDeviceToDevice, stream));
    }
    // The four projections of `mix` are independent: side streams run three beside the first.
    const SideStreams* side = ctx.trace == nullptr ? ctx.side : nullptr;
    if (side != nullptr) side->fork(stream, 3);
    linear_apply(weights.in_qkv, mix, n_rows, hist + kept * conv_dim, stream);
    linear_apply(weights.in_z, mix, n_rows, z, side != nullptr ? side->get(0) : stream);
    linear_apply(weights.in_b, mix, n_rows, b_raw, side != nullptr ? side->get(1) : stream);
    linear_apply(weights.in_a, mix, n_rows, a_raw, side != nullptr ? side->get(2) : stream);
    if (side != nullptr) side->join(stream, 3);

    if (step) {
        launch_dependent(conv_step_kernel, dim3(blocks_for(conv_dim, kElementwiseThreads)),
                         dim3(kElementwiseThreads), 0, stream, state.conv, hist + kept * conv_dim,
                         weights.conv, static_cast<int>(n_rows), conv_dim, static_cast<int>(taps),
                         conv, ctx.gdn_conv_snapshots);
    } else {
        launch_dependent(conv_silu_kernel, dim3(blocks_for(n_rows * conv_dim, kElementwiseThreads)),
                         dim3(kElementwiseThreads), 0, stream, hist, weights.conv, n_rows, conv_dim,
                         static_cast<int>(taps), conv);
    }
    const float q_scale = 1.0F / std::sqrt(static_cast<float>(dk));
    launch_dependent(qk_l2_norm_kernel,
                     dim3(static_cast<unsigned>(n_rows), static_cast<unsigned>(2 * n_key_heads)),
                     dim3(32), 0, stream, conv, conv_dim, n_key_heads, static_cast<int>(dk),
                     q_scale);

    DeltaRuleParams params;
    params.conv = conv;
    params.b_raw = b_raw;
    params.a_raw = a_raw;
    params.a_log = weights.a_log;
    params.dt_bias = weights.dt_bias;
    params.state = state.recurrent;
    params.heads = heads;
    params.snapshots = ctx.gdn_recurrent_snapshots;
    params.n_rows = n_rows;
    params.conv_dim = conv_dim;
    params.key_dim = key_dim;
    params.n_value_heads = n_value_heads;
    params.head_ratio = n_value_heads / n_key_heads;
    params.dk = dk;
    params.dv = dv;
    if (params.snapshots == nullptr && n_rows >= kMinChunkedRows &&
        delta_rule_chunked_supports(dk)) {
        delta_rule_chunked(params, stream);
    } else {
        launch_delta_rule(params, stream);
    }

    if (ctx.gdn_conv_snapshots != nullptr && kept > 0 && !step) {
        const int64_t n = n_rows * kept * conv_dim;
        launch_dependent(conv_snapshot_kernel, dim3(blocks_for(n, kElementwiseThreads)),
                         dim3(kElementwiseThreads), 0, stream, hist, n_rows, conv_dim,
                         kept * conv_dim, ctx.gdn_conv_snapshots);
    }
    if (state_bytes > 0 && !step) {
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(state.conv, hist + n_rows * conv_dim, state_bytes,
                                             cudaMemcpyDeviceToDevice, stream));
    }

    // Gated RMSNorm per head (plain w over dv, norm before gate), then out_proj.
    gated_rms_norm_rows(heads, weights.norm, z, c.output_gate == GateActivation::Sigmoid,
                        n_rows * n_value_heads, dv, dv, ctx.eps(), heads, stream);
    linear_apply(weights.out, heads, n_rows, y, stream);
}

}  // namespace cherenkov::engine::cuda
