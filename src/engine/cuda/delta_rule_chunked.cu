// The chunked (WY) delta rule for Gated DeltaNet prefill (docs/qwen4_exp.md §3.5), a close
// transcription of delta_rule_chunked() in tests/engine/model/delta_rule_chunked_test.cpp, which
// derives it from the recurrence and checks it against the token-by-token form. Per chunk of
// C = 64 rows with S₀ the state before it, G_t the chunk-local cumulative log decay and
// Γ_t = exp(G_t):
//   A[t,s] = β_t·exp(G_t − G_s)·(k_t·k_s) (s < t),   M[t,s] = exp(G_t − G_s)·(q_t·k_s) (s ≤ t)
//   [W | Ũ] = (I + A)⁻¹·[diag(β·Γ)·K | diag(β)·V]              (forward substitution)
//   U = Ũ − W·S₀,   O = diag(Γ)·Q·S₀ + M·U,   S ← Γ_{C−1}·S₀ + K̃ᵀ·U,   K̃[s] = exp(G_{C−1} −
//   G_s)·k_s
// The first kernel computes everything that does not depend on the state (A, M, W, Ũ, the decays)
// for every (chunk, value head) at once; the second walks the chunks in order per (value head,
// 32 value columns), with S₀ in shared memory. Columns of S evolve independently, which is what
// lets the second kernel split dv across blocks like the token-by-token kernel. A last chunk of
// L < C rows is zero-padded (k, q, v, β and g zero), which leaves every sum over real rows
// unchanged. Every sum runs in a fixed order and no result is accumulated atomically, so repeated
// runs give the same bits. Float32 FMA throughout; the cumulative log decay is summed in double
// (the prototype's comment says why). Both kernels wait for the previous kernel before touching
// memory and are launched with launch_dependent (dependent_launch.cuh).
#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/delta_rule_chunked.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kChunk = 64;  // C, rows per chunk (fla's choice; W and Ũ then fit one thread)
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32;           // state kernel: value columns per block, lane = column
constexpr int kPitch = kChunk + 1;  // transposed [dk][C] tiles: a warp storing one row's
                                    // consecutive dk values then hits 32 different banks

// One (chunk, value head) record of the scratch the prepare kernel fills, floats in this order:
// W [C, dk], Ũ [C, dv], M [C, C], gamma [C] (Γ_t), tail [C] (exp(G_{C−1} − G_t)). Every offset
// is a multiple of 4 floats.
struct RecordLayout {
    int64_t dk;
    int64_t dv;
    __host__ __device__ int64_t w() const { return 0; }
    __host__ __device__ int64_t u() const { return kChunk * dk; }
    __host__ __device__ int64_t m() const { return kChunk * (dk + dv); }
    __host__ __device__ int64_t gamma() const { return m() + kChunk * kChunk; }
    __host__ __device__ int64_t tail() const { return gamma() + kChunk; }
    __host__ __device__ int64_t size() const { return tail() + kChunk; }
};

template <int kDk>
constexpr size_t prepare_smem_bytes() {
    // k̂ᵀ [kDk][kPitch], then q̂ᵀ [kDk][kPitch] whose space A [C][C] reuses.
    return sizeof(float) * (kDk * kPitch + std::max(kDk * kPitch, kChunk * kChunk));
}

template <int kDk>
constexpr size_t state_smem_bytes() {
    // S₀ [kDk][kCols], a row tile [C][kDk], U [C][kCols], M [C][C].
    return sizeof(float) * (kDk * kCols + kChunk * kDk + kChunk * kCols + kChunk * kChunk);
}

// L: the real rows of the chunk starting at row `first` (C but for the last chunk).
__device__ __forceinline__ int rows_in_chunk(int64_t n_rows, int64_t first) {
    return n_rows - first < kChunk ? static_cast<int>(n_rows - first) : kChunk;
}

// Grid (n_chunks, Hv), kThreads threads: block (chunk, head) fills its record.
template <int kDk>
__global__ void __launch_bounds__(kThreads)
    delta_rule_chunked_prepare_kernel(const DeltaRuleParams p, float* __restrict__ records) {
    extern __shared__ __align__(16) float smem[];
    float* k_tr = smem;                  // [kDk][kPitch]: k̂ of the chunk's rows, transposed
    float* q_tr = smem + kDk * kPitch;   // [kDk][kPitch]: q̂, transposed
    float* a = q_tr;                     // [C][C], once q̂ has been read
    __shared__ double cum[kChunk];       // G_t
    __shared__ float log_decay[kChunk];  // g_t
    __shared__ float beta[kChunk];
    __shared__ float gamma[kChunk];  // Γ_t
    wait_for_previous_kernel();
    allow_next_kernel();

    const int tid = static_cast<int>(threadIdx.x);
    const int chunk = static_cast<int>(blockIdx.x);
    const int64_t head = blockIdx.y;
    const int64_t key_head = head / p.head_ratio;
    const int64_t first = int64_t{chunk} * kChunk;
    const int n = rows_in_chunk(p.n_rows, first);
    const RecordLayout layout{kDk, p.dv};
    float* record = records + (int64_t{chunk} * p.n_value_heads + head) * layout.size();

    // Gates as the token-by-token kernel computes them; padded rows get g = 0 and β = 0.
    if (tid < kChunk) {
        float g = 0.0F;
        float b = 0.0F;
        if (tid < n) {
            const int64_t at = (first + tid) * p.n_value_heads + head;
            g = -expf(p.a_log[head]) * softplus_f(p.a_raw[at] + p.dt_bias[head]);
            b = sigmoid_f(p.b_raw[at]);
        }
        log_decay[tid] = g;
        beta[tid] = b;
    }
    for (int e = tid; e < kChunk * kDk; e += kThreads) {
        const int t = e / kDk;
        const int i = e % kDk;
        float q = 0.0F;
        float k = 0.0F;
        if (t < n) {
            const float* row = p.conv + (first + t) * p.conv_dim + key_head * kDk;
            q = row[i];
            k = row[p.key_dim + i];
        }
        q_tr[i * kPitch + t] = q;
        k_tr[i * kPitch + t] = k;
    }
    __syncthreads();
    if (tid == 0) {
        double sum = 0.0;
        for (int t = 0; t < kChunk; ++t) {
            sum += static_cast<double>(log_decay[t]);
            cum[t] = sum;
        }
    }
    __syncthreads();
    if (tid < kChunk) {
        // Padded rows add g = 0, so G_{C−1} = G_{L−1}.
        const float g = expf(static_cast<float>(cum[tid]));
        gamma[tid] = g;
        record[layout.gamma() + tid] = g;
        record[layout.tail() + tid] = expf(static_cast<float>(cum[kChunk - 1] - cum[tid]));
    }

    // k_t·k_s and q_t·k_s for rows t = ty + 16·r and columns s = tx + 16·c (r, c < 4).
    const int tx = tid % 16;
    const int ty = tid / 16;
    float kk[4][4] = {};
    float qk[4][4] = {};
    for (int i = 0; i < kDk; ++i) {
        const float* k_i = k_tr + i * kPitch;
        const float* q_i = q_tr + i * kPitch;
        float k_row[4];
        float q_row[4];
        float k_col[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            k_row[r] = k_i[ty + 16 * r];
            q_row[r] = q_i[ty + 16 * r];
            k_col[r] = k_i[tx + 16 * r];
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                kk[r][c] += k_row[r] * k_col[c];
                qk[r][c] += q_row[r] * k_col[c];
            }
        }
    }
    __syncthreads();  // q̂ᵀ is read; its space becomes A; gamma is written
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int t = ty + 16 * r;
            const int s = tx + 16 * c;
            // exp(G_t − G_s) only for s ≤ t: above the diagonal it could overflow.
            const float decay = s <= t ? expf(static_cast<float>(cum[t] - cum[s])) : 0.0F;
            a[t * kChunk + s] = s < t ? beta[t] * decay * kk[r][c] : 0.0F;
            record[layout.m() + t * kChunk + s] = s <= t ? decay * qk[r][c] : 0.0F;
        }
    }
    __syncthreads();

    // (I + A)·X = [β·Γ·K | β·V] by forward substitution, one right-hand column per thread: a
    // column needs only its own earlier rows, so the 64 rows live in registers (fully unrolled)
    // and no barrier is needed.
    const int64_t v_offset = 2 * p.key_dim + head * p.dv;
    for (int col = tid; col < kDk + p.dv; col += kThreads) {
        const bool is_key = col < kDk;
        float x[kChunk];
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
            float acc;
            if (is_key) {
                acc = beta[t] * gamma[t] * k_tr[col * kPitch + t];
            } else {
                acc = t < n ? beta[t] * p.conv[(first + t) * p.conv_dim + v_offset + (col - kDk)]
                            : 0.0F;
            }
#pragma unroll
            for (int s = 0; s < t; ++s) acc -= a[t * kChunk + s] * x[s];
            x[t] = acc;
        }
        float* out = is_key ? record + layout.w() + col : record + layout.u() + (col - kDk);
        const int64_t stride = is_key ? kDk : p.dv;
#pragma unroll
        for (int t = 0; t < kChunk; ++t) out[t * stride] = x[t];
    }
}

// Grid (Hv, ceil(dv / kCols)), kThreads threads: block (head, column tile) carries S[:, cols]
// through the chunks in order. Thread (warp w, lane c) owns column c of the tile, rows t = w + 8·r
// of U and O, and rows i = w + 8·r of S.
template <int kDk>
__global__ void __launch_bounds__(kThreads)
    delta_rule_chunked_state_kernel(const DeltaRuleParams p, const float* __restrict__ records) {
    constexpr int kRowsPerWarp = kChunk / kWarps;  // of U and O
    constexpr int kKeysPerWarp = kDk / kWarps;     // of S
    extern __shared__ __align__(16) float smem[];
    float* s0 = smem;                // [kDk][kCols]: the state before the chunk
    float* tile = s0 + kDk * kCols;  // [C][kDk]: W, then diag(Γ)·Q, then K̃
    float* u = tile + kChunk * kDk;  // [C][kCols]
    float* m = u + kChunk * kCols;   // [C][C]
    __shared__ float gamma[kChunk];
    __shared__ float tail[kChunk];
    wait_for_previous_kernel();
    allow_next_kernel();

    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int64_t head = blockIdx.x;
    const int64_t key_head = head / p.head_ratio;
    const int64_t col = static_cast<int64_t>(blockIdx.y) * kCols + lane;
    const bool active = col < p.dv;
    const RecordLayout layout{kDk, p.dv};
    const int64_t value_dim = p.n_value_heads * p.dv;
    float* state = p.state + head * kDk * p.dv;
    const float* q_rows = p.conv + key_head * kDk;
    const float* k_rows = p.conv + p.key_dim + key_head * kDk;

#pragma unroll
    for (int r = 0; r < kKeysPerWarp; ++r) {
        const int i = warp + kWarps * r;
        s0[i * kCols + lane] = active ? state[i * p.dv + col] : 0.0F;
    }

    const int64_t n_chunks = (p.n_rows + kChunk - 1) / kChunk;
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
        const int64_t first = chunk * kChunk;
        const int n = rows_in_chunk(p.n_rows, first);
        const float* record = records + (chunk * p.n_value_heads + head) * layout.size();

        // Stage W, M and the decays.
        const auto* w4 = reinterpret_cast<const float4*>(record + layout.w());
        for (int e = tid; e < kChunk * kDk / 4; e += kThreads)
            reinterpret_cast<float4*>(tile)[e] = w4[e];
        const auto* m4 = reinterpret_cast<const float4*>(record + layout.m());
        for (int e = tid; e < kChunk * kChunk / 4; e += kThreads)
            reinterpret_cast<float4*>(m)[e] = m4[e];
        if (tid < kChunk) {
            gamma[tid] = record[layout.gamma() + tid];
            tail[tid] = record[layout.tail() + tid];
        }
        __syncthreads();

        // U = Ũ − W·S₀
        float acc[kRowsPerWarp] = {};
        for (int i = 0; i < kDk; ++i) {
            const float s = s0[i * kCols + lane];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r)
                acc[r] += tile[(warp + kWarps * r) * kDk + i] * s;
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int t = warp + kWarps * r;
            const float u_tilde = active ? record[layout.u() + t * p.dv + col] : 0.0F;
            u[t * kCols + lane] = u_tilde - acc[r];
        }
        __syncthreads();  // U is complete and W is read

        // O = diag(Γ)·Q·S₀ + M·U
        for (int e = tid; e < kChunk * kDk; e += kThreads) {
            const int t = e / kDk;
            const int i = e % kDk;
            tile[e] = t < n ? gamma[t] * q_rows[(first + t) * p.conv_dim + i] : 0.0F;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r] = 0.0F;
        for (int i = 0; i < kDk; ++i) {
            const float s = s0[i * kCols + lane];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r)
                acc[r] += tile[(warp + kWarps * r) * kDk + i] * s;
        }
        for (int s = 0; s < kChunk; ++s) {
            const float u_s = u[s * kCols + lane];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r)
                acc[r] += m[(warp + kWarps * r) * kChunk + s] * u_s;
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int t = warp + kWarps * r;
            if (active && t < n) p.heads[(first + t) * value_dim + head * p.dv + col] = acc[r];
        }
        __syncthreads();  // diag(Γ)·Q is read

        // S ← Γ_{C−1}·S₀ + K̃ᵀ·U, each thread on its own elements of s0.
        for (int e = tid; e < kChunk * kDk; e += kThreads) {
            const int t = e / kDk;
            const int i = e % kDk;
            tile[e] = t < n ? tail[t] * k_rows[(first + t) * p.conv_dim + i] : 0.0F;
        }
        __syncthreads();
        const float chunk_decay = gamma[kChunk - 1];
        float next[kKeysPerWarp];
#pragma unroll
        for (int r = 0; r < kKeysPerWarp; ++r) {
            next[r] = chunk_decay * s0[(warp + kWarps * r) * kCols + lane];
        }
        for (int t = 0; t < kChunk; ++t) {
            const float u_t = u[t * kCols + lane];
#pragma unroll
            for (int r = 0; r < kKeysPerWarp; ++r)
                next[r] += tile[t * kDk + warp + kWarps * r] * u_t;
        }
#pragma unroll
        for (int r = 0; r < kKeysPerWarp; ++r) s0[(warp + kWarps * r) * kCols + lane] = next[r];
        __syncthreads();  // the next chunk restages tile, U, M and the decays
    }

    if (!active) return;
#pragma unroll
    for (int r = 0; r < kKeysPerWarp; ++r) {
        const int i = warp + kWarps * r;
        state[i * p.dv + col] = s0[i * kCols + lane];
    }
}

template <int kDk>
void launch(const DeltaRuleParams& p, float* records, int64_t n_chunks, cudaStream_t stream) {
    // Both kernels take more than the default 48 KB of dynamic shared memory for dk = 128.
    constexpr size_t prepare_bytes = prepare_smem_bytes<kDk>();
    constexpr size_t state_bytes = state_smem_bytes<kDk>();
    CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(delta_rule_chunked_prepare_kernel<kDk>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(prepare_bytes)));
    CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(delta_rule_chunked_state_kernel<kDk>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(state_bytes)));
    const dim3 prepare_grid(static_cast<unsigned>(n_chunks),
                            static_cast<unsigned>(p.n_value_heads));
    launch_dependent(delta_rule_chunked_prepare_kernel<kDk>, prepare_grid, dim3(kThreads),
                     prepare_bytes, stream, p, records);
    const dim3 state_grid(static_cast<unsigned>(p.n_value_heads),
                          static_cast<unsigned>((p.dv + kCols - 1) / kCols));
    launch_dependent(delta_rule_chunked_state_kernel<kDk>, state_grid, dim3(kThreads), state_bytes,
                     stream, p, records);
}

}  // namespace

bool delta_rule_chunked_supports(int64_t dk) {
    return dk == 8 || dk == 16 || dk == 32 || dk == 64 || dk == 128;
}

void delta_rule_chunked(const DeltaRuleParams& p, cudaStream_t stream) {
    CHERENKOV_ASSERT(
        p.n_rows > 0 && p.dv > 0 && p.head_ratio > 0 && p.n_value_heads % p.head_ratio == 0,
        "chunked delta rule shape");
    const int64_t n_chunks = (p.n_rows + kChunk - 1) / kChunk;
    const RecordLayout layout{p.dk, p.dv};
    DeviceScratch<float> records(static_cast<size_t>(n_chunks * p.n_value_heads * layout.size()),
                                 stream);
    switch (p.dk) {
        case 8: launch<8>(p, records.data(), n_chunks, stream); break;
        case 16: launch<16>(p, records.data(), n_chunks, stream); break;
        case 32: launch<32>(p, records.data(), n_chunks, stream); break;
        case 64: launch<64>(p, records.data(), n_chunks, stream); break;
        case 128: launch<128>(p, records.data(), n_chunks, stream); break;
        default:
            throw_unsupported("[delta_rule_chunked] key head dim " + std::to_string(p.dk) +
                              " (supported: 8, 16, 32, 64, 128)");
    }
}

}  // namespace cherenkov::engine::cuda
