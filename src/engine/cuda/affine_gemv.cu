// Decode GEMV for MLX-affine weights (affine_gemv.h). Layout of the work:
//   * a "piece" is 32 consecutive columns of one weight row: exactly `Bits` 32-bit words of codes
//     (4·Bits bytes, loaded as 16-byte vectors where the width allows) and one group's scale and
//     bias (groups are 32, 64 or 128 columns, so a piece never straddles two groups);
//   * a sub-warp of L lanes (L = 32, 16, 8 or 4, see lanes_for) owns kRowsPerLane weight rows and
//     walks their pieces with stride L, keeping kStages pieces of loads in flight; each lane reads
//     a piece's x values once and uses them for all of its rows;
//   * x [R, cols] is first copied into shared memory (swizzled, see SharedX) when it fits;
//   * per piece, Σ q·x and Σ x are summed in float32, then total += scale·Σqx + bias·Σx (MLX's
//     qdot identity: one multiply per weight row and input row, the bias costs nothing per weight);
//   * the L lanes' totals are combined by an xor butterfly, so each output's order depends only on
//     the shape: results are bitwise reproducible.
// Codes become floats without integer conversions (I2F issues at a quarter of the FMA rate): a
// code at bits p..p+Bits−1 of a word (p + Bits ≤ 23) is OR-ed under the exponent of 2^23, which
// reads as 2^23 + q·2^p exactly, and one FMA by 2^−p minus 2^(23−p) leaves q exactly.
// Measured on an H200 (bench/gemv_cuda_bench.cu, CUDA graph replays): [10240, 2560] Q4 at 1 row
// reads 1.19 TB/s (12.4 µs), Q8 1.89 TB/s; time hardly depends on the bit width, so the kernel is
// bound per weight (instruction issue or latency), not by bytes. The routed experts and tall dense
// matrices therefore go to the tensor-core kernels of affine_gemv_mma.cu where they apply
// (docs/gemv-tensor-core.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/affine_gemv_bulk.h"
#include "engine/cuda/affine_gemv_mma.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/expert_layer.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps per block
constexpr int kWarpsPerBlock = kThreads / 32;
// Weight rows per lane sharing one load of x. 4 keeps L1 traffic for x at ≤ 2·R bytes per weight
// byte (at 4 bits) and the grid wide enough for 640-row experts.
constexpr int kRowsPerLane = 4;
constexpr int kPieceCols = 32;

enum class Mode { Dense, GateUp, Down };

struct GemvParams {
    // Dense: the matrix itself. GateUp/Down: taken from table[blockIdx.y].
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;
    const ExpertAddress* table;
    const int* n_in_use;  // GateUp/Down: table entries to compute (device), or null: all
    int rows;             // output rows of one matrix
    int n_pieces;         // cols / 32
    int group_shift;      // log2(group_size / 32)
    int lanes;            // lanes per sub-warp (L)
    const float* x;       // [n_rows, x_stride] (GateUp: shared; Down: + e·x_expert_stride)
    size_t x_stride;
    size_t x_expert_stride;
    float* y;  // [n_rows, y_stride] (+ e·y_expert_stride)
    size_t y_stride;
    size_t y_expert_stride;
};

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ float exp2_int(int n) {  // 2^n for a compile-time n in [-126, 127]
    return __uint_as_float(static_cast<uint32_t>(127 + n) << 23);
}

// The 32 codes of one piece as Bits words (a plain little-endian bit stream). Weights are read
// once per call: the evict-first hint keeps them from pushing x out of the caches.
template <int Bits>
__device__ __forceinline__ void load_piece(const uint8_t* p, uint32_t (&w)[Bits]) {
    if constexpr (Bits == 2) {
        const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
        w[0] = v.x;
        w[1] = v.y;
    } else if constexpr (Bits == 3) {  // 12 bytes: only 4-byte alignment is guaranteed
        const auto* q = reinterpret_cast<const unsigned int*>(p);
        w[0] = __ldcs(q);
        w[1] = __ldcs(q + 1);
        w[2] = __ldcs(q + 2);
    } else {
        static_assert(Bits == 4 || Bits == 8);
#pragma unroll
        for (int v = 0; v < Bits / 4; ++v) {
            const uint4 u = __ldcs(reinterpret_cast<const uint4*>(p) + v);
            w[4 * v + 0] = u.x;
            w[4 * v + 1] = u.y;
            w[4 * v + 2] = u.z;
            w[4 * v + 3] = u.w;
        }
    }
}

// Code i (0..31, a compile-time constant after unrolling) of a piece, as an exact float.
template <int Bits>
__device__ __forceinline__ float code_at(const uint32_t (&w)[Bits], int i) {
    // Codes per shifted window whose bits stay in mantissa bits 0..22.
    constexpr int kPerWindow = (23 - Bits) / Bits + 1;
    constexpr uint32_t kMask = (1U << Bits) - 1;
    const int bit = i * Bits;
    uint32_t window;
    int p;
    if constexpr (32 % Bits == 0) {  // codes never straddle words: windows start inside a word
        const int in_word = bit % 32;
        const int start = in_word / (kPerWindow * Bits) * (kPerWindow * Bits);
        window = w[bit / 32] >> start;
        p = in_word - start;
    } else {  // 3 bits: windows of 7 codes over the 96-bit stream, joined across words
        const int start = i / kPerWindow * kPerWindow * Bits;
        const uint32_t lo = w[start / 32];
        const uint32_t hi = start / 32 + 1 < Bits ? w[start / 32 + 1] : 0U;
        // Plain shifts rather than __funnelshift_r: the compiler merges them across codes.
        window = start % 32 == 0 ? lo : (lo >> (start % 32)) | (hi << (32 - start % 32));
        p = bit - start;
    }
    const float f = __uint_as_float(0x4B000000U | (window & (kMask << p)));  // 2^23 + q·2^p
    return fmaf(f, exp2_int(-p), -exp2_int(23 - p));                         // q
}

// Where a lane reads x: float4 f (0..7) of piece `piece` of input row t.
// GlobalX reads device memory: a warp's 32 lanes touch 32 different 128-byte lines per load (one
// piece each), which made the first version L1-bound (1 TB/s at Q4, nearly the same at Q2 and Q8).
struct GlobalX {
    const float* x;
    size_t stride;
    __device__ __forceinline__ float4 at(int t, int piece, int f) const {
        return reinterpret_cast<const float4*>(x + t * stride +
                                               static_cast<size_t>(piece) * kPieceCols)[f];
    }
};

// SharedX reads the block's copy of x in shared memory, float4 f of piece p stored at slot
// f ^ (p & 7): the 8 lanes of each 128-bit access phase hit 8 different bank quads.
struct SharedX {
    const float4* xs;
    int row_f4;  // float4 per input row: n_pieces · 8
    __device__ __forceinline__ float4 at(int t, int piece, int f) const {
        return xs[t * row_f4 + piece * 8 + (f ^ (piece & 7))];
    }
};

// One piece of each of a lane's kRowsPerLane rows in registers: codes, scale and bias bits.
template <int Bits>
struct Stage {
    uint32_t codes[kRowsPerLane][Bits];
    uint16_t scale[kRowsPerLane];
    uint16_t bias[kRowsPerLane];
};

// Pieces in flight per lane. Every load of a piece (codes, scale, bias) is issued D−1 pieces ahead
// of its use, so a lane with ≤ D pieces (cols ≤ D·1024 with 32 lanes a row) pays the memory
// latency once. Fewer stages where registers are short (8 bits, 3-4 input rows).
template <int Bits, int R>
constexpr int kStages = (Bits == 8 || R >= 3) ? 2 : 3;

template <int Bits>
__device__ __forceinline__ void load_stage(Stage<Bits>& st,
                                           const uint8_t* const (&codes)[kRowsPerLane],
                                           const uint16_t* const (&scales)[kRowsPerLane],
                                           const uint16_t* const (&biases)[kRowsPerLane], int piece,
                                           int n_pieces, int group_shift) {
    if (piece >= n_pieces) return;
    const int group = piece >> group_shift;
#pragma unroll
    for (int w = 0; w < kRowsPerLane; ++w) {
        load_piece<Bits>(codes[w] + piece * (4 * Bits), st.codes[w]);
        st.scale[w] = __ldg(scales[w] + group);
        st.bias[w] = __ldg(biases[w] + group);
    }
}

// total[w][t] += scale·Σ_{32 cols} q·x + bias·Σ x over one piece.
template <int Bits, int R, typename XSource>
__device__ __forceinline__ void piece_dot(const Stage<Bits>& st, const XSource& x, int piece,
                                          float (&total)[kRowsPerLane][R]) {
    float acc[kRowsPerLane][R];
    float xsum[R];
#pragma unroll
    for (int t = 0; t < R; ++t) {
        xsum[t] = 0.0F;
#pragma unroll
        for (int w = 0; w < kRowsPerLane; ++w) acc[w][t] = 0.0F;
    }
#pragma unroll
    for (int chunk = 0; chunk < kPieceCols / 8; ++chunk) {
        float xv[R][8];
#pragma unroll
        for (int t = 0; t < R; ++t) {
            const float4 a = x.at(t, piece, 2 * chunk);
            const float4 b = x.at(t, piece, 2 * chunk + 1);
            xv[t][0] = a.x;
            xv[t][1] = a.y;
            xv[t][2] = a.z;
            xv[t][3] = a.w;
            xv[t][4] = b.x;
            xv[t][5] = b.y;
            xv[t][6] = b.z;
            xv[t][7] = b.w;
#pragma unroll
            for (int k = 0; k < 8; ++k) xsum[t] += xv[t][k];
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
#pragma unroll
            for (int w = 0; w < kRowsPerLane; ++w) {
                const float q = code_at<Bits>(st.codes[w], chunk * 8 + k);
#pragma unroll
                for (int t = 0; t < R; ++t) acc[w][t] = fmaf(q, xv[t][k], acc[w][t]);
            }
        }
    }
#pragma unroll
    for (int w = 0; w < kRowsPerLane; ++w) {
        const float scale = bf16_bits_to_float(st.scale[w]);
        const float bias = bf16_bits_to_float(st.bias[w]);
#pragma unroll
        for (int t = 0; t < R; ++t) {
            total[w][t] = fmaf(scale, acc[w][t], total[w][t]);
            total[w][t] = fmaf(bias, xsum[t], total[w][t]);
        }
    }
}

// Σ_c W[row_w][c]·x[t][c] for the kRowsPerLane rows whose piece-0 addresses are given, summed
// over this lane's pieces (sub_lane, sub_lane + L, …) in order and then over the sub-warp's L
// lanes. Every lane of the warp must call it (the butterfly uses all 32 lanes).
// First loads of a lane's pieces, issued before anything else the kernel waits for.
template <int Bits, int R>
__device__ __forceinline__ void prefetch_stages(Stage<Bits> (&stage)[kStages<Bits, R>],
                                                const uint8_t* const (&codes)[kRowsPerLane],
                                                const uint16_t* const (&scales)[kRowsPerLane],
                                                const uint16_t* const (&biases)[kRowsPerLane],
                                                const GemvParams& p, int sub_lane) {
#pragma unroll
    for (int d = 0; d < kStages<Bits, R>; ++d) {
        load_stage<Bits>(stage[d], codes, scales, biases, sub_lane + d * p.lanes, p.n_pieces,
                         p.group_shift);
    }
}

template <int Bits, int R, typename XSource>
__device__ __forceinline__ void dot_rows(Stage<Bits> (&stage)[kStages<Bits, R>],
                                         const uint8_t* const (&codes)[kRowsPerLane],
                                         const uint16_t* const (&scales)[kRowsPerLane],
                                         const uint16_t* const (&biases)[kRowsPerLane],
                                         const GemvParams& p, const XSource& x, int sub_lane,
                                         float (&total)[kRowsPerLane][R]) {
    constexpr int kD = kStages<Bits, R>;
#pragma unroll
    for (int w = 0; w < kRowsPerLane; ++w) {
#pragma unroll
        for (int t = 0; t < R; ++t) total[w][t] = 0.0F;
    }
    for (int base = sub_lane; base < p.n_pieces; base += kD * p.lanes) {
#pragma unroll
        for (int d = 0; d < kD; ++d) {
            const int piece = base + d * p.lanes;
            if (piece < p.n_pieces) {
                piece_dot<Bits, R>(stage[d], x, piece, total);
                // Refill this stage with the piece kD steps ahead (no-op past the end).
                load_stage<Bits>(stage[d], codes, scales, biases, piece + kD * p.lanes, p.n_pieces,
                                 p.group_shift);
            }
        }
    }
    // Butterfly over the sub-warp (aligned blocks of L lanes): every lane ends with the sum.
    for (int offset = p.lanes / 2; offset > 0; offset /= 2) {
#pragma unroll
        for (int w = 0; w < kRowsPerLane; ++w) {
#pragma unroll
            for (int t = 0; t < R; ++t) {
                total[w][t] += __shfl_xor_sync(0xFFFFFFFFU, total[w][t], offset);
            }
        }
    }
}

__device__ __forceinline__ float silu(float v) {
    return v / (1.0F + expf(-v));
}

// grid: (ceil(rows / rows_per_block), n_experts or 1), block: kThreads.
// Dense and Down: each sub-warp computes kRowsPerLane consecutive output rows.
// GateUp: each sub-warp computes kRowsPerLane/2 rows of h from the same rows of gate and up.
// kSharedX: the block first copies x [R, cols] into dynamic shared memory (swizzled, SharedX).
template <int Bits, int R, Mode M, bool kSharedX>
__global__ void __launch_bounds__(kThreads) affine_gemv_kernel(const GemvParams p) {
    constexpr int kOutRows = M == Mode::GateUp ? kRowsPerLane / 2 : kRowsPerLane;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp =
        static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
    const int subs = 32 / p.lanes;
    const int sub = lane / p.lanes;
    const int sub_lane = lane % p.lanes;
    const int row0 = (warp * subs + sub) * kOutRows;

    // The gate/up table may have been written by the previous kernel: wait before reading it.
    // Down reads the table gate/up already read (its writer finished before gate/up let this
    // launch start), and weights never change: their loads start before the wait.
    if constexpr (M == Mode::GateUp) wait_for_previous_kernel();
    // Entries past the count may hold anything (down reads the count as it reads the table).
    // Every block waits before it ends, so that this grid's end implies the previous one's.
    if constexpr (M != Mode::Dense) {
        if (p.n_in_use != nullptr && static_cast<int>(blockIdx.y) >= *p.n_in_use) {
            if constexpr (M == Mode::Down) wait_for_previous_kernel();
            return;
        }
    }
    const uint8_t* base_codes = p.codes;
    const uint16_t* base_scales = p.scales;
    const uint16_t* base_biases = p.biases;
    const float* x = p.x;
    float* y = p.y;
    const int e = static_cast<int>(blockIdx.y);
    if constexpr (M == Mode::Down) {
        const ExpertAddress& a = p.table[e];
        base_codes = a.down_codes;
        base_scales = a.down_scales;
        base_biases = a.down_biases;
        x += e * p.x_expert_stride;
    }
    if constexpr (M != Mode::Dense) y += e * p.y_expert_stride;

    const size_t row_bytes = static_cast<size_t>(p.n_pieces) * 4 * Bits;
    const size_t row_groups = static_cast<size_t>(p.n_pieces >> p.group_shift);
    const uint8_t* codes[kRowsPerLane];
    const uint16_t* scales[kRowsPerLane];
    const uint16_t* biases[kRowsPerLane];
#pragma unroll
    for (int w = 0; w < kRowsPerLane; ++w) {
        const int out = w % kOutRows;
        // Rows past the end read the last row (valid memory); their sums are never stored.
        const size_t row = static_cast<size_t>(min(row0 + out, p.rows - 1));
        if constexpr (M == Mode::GateUp) {
            const ExpertAddress& a = p.table[e];
            const bool up = w >= kOutRows;
            codes[w] = (up ? a.up_codes : a.gate_codes) + row * row_bytes;
            scales[w] = (up ? a.up_scales : a.gate_scales) + row * row_groups;
            biases[w] = (up ? a.up_biases : a.gate_biases) + row * row_groups;
        } else {
            codes[w] = base_codes + row * row_bytes;
            scales[w] = base_scales + row * row_groups;
            biases[w] = base_biases + row * row_groups;
        }
    }
    // Weight loads first, so their latency overlaps the copy of x and, for Dense and Down, the
    // previous kernel's tail (see the waits).
    const bool active = warp * subs * kOutRows < p.rows;  // warp-uniform
    Stage<Bits> stage[kStages<Bits, R>];
    if (active) prefetch_stages<Bits, R>(stage, codes, scales, biases, p, sub_lane);
    // x (Down: gate/up's h) is the previous kernel's output.
    if constexpr (M != Mode::GateUp) wait_for_previous_kernel();
    allow_next_kernel();

    extern __shared__ float4 x_shared[];
    if constexpr (kSharedX) {
        const int row_f4 = p.n_pieces * 8;
        for (int f = static_cast<int>(threadIdx.x); f < R * row_f4; f += kThreads) {
            const int t = f / row_f4;
            const int c4 = f - t * row_f4;
            const int piece = c4 >> 3;
            x_shared[t * row_f4 + piece * 8 + ((c4 & 7) ^ (piece & 7))] =
                reinterpret_cast<const float4*>(x + t * p.x_stride)[c4];
        }
        __syncthreads();
    }
    if (!active) return;  // whole warp past the end

    float total[kRowsPerLane][R];
    if constexpr (kSharedX) {
        dot_rows<Bits, R>(stage, codes, scales, biases, p, SharedX{x_shared, p.n_pieces * 8},
                          sub_lane, total);
    } else {
        dot_rows<Bits, R>(stage, codes, scales, biases, p, GlobalX{x, p.x_stride}, sub_lane, total);
    }

    // Lane j < kOutRows·R of the sub-warp stores one output (all lanes hold every sum).
#pragma unroll
    for (int out = 0; out < kOutRows; ++out) {
#pragma unroll
        for (int t = 0; t < R; ++t) {
            if (sub_lane != (out * R + t) % p.lanes || row0 + out >= p.rows) continue;
            float value;
            if constexpr (M == Mode::GateUp) {
                value = silu(total[out][t]) * total[out + kOutRows][t];
            } else {
                value = total[out][t];
            }
            y[t * p.y_stride + row0 + out] = value;
        }
    }
}

// Lanes per output row: the widest sub-warp that keeps at least 60% of its lane-pieces busy.
// Wide sub-warps mean more warps and fewer pieces per lane, i.e. fewer memory round trips per
// lane; decode is bound by latency and bytes in flight more than by idle lanes (measured on H200:
// 16 lanes × 5 pieces for cols 2560 ran at 1 TB/s, latency-bound). cols 640 → 32 lanes × 1 piece.
int lanes_for(int n_pieces) {
    for (int lanes = 32; lanes > 4; lanes /= 2) {
        const int iterations = (n_pieces + lanes - 1) / lanes;
        if (n_pieces * 10 >= iterations * lanes * 6) return lanes;
    }
    return 4;
}

int group_shift_for(int group_size) {
    return group_size == 32 ? 0 : group_size == 64 ? 1 : 2;
}

bool supported(int bits, int group_size) {
    return (bits == 2 || bits == 3 || bits == 4 || bits == 8) &&
           (group_size == 32 || group_size == 64 || group_size == 128);
}

void check_shape(const char* what, int64_t rows, int64_t cols, int bits, int group_size) {
    if (!supported(bits, group_size)) {
        throw_unsupported(std::string("[") + what + "] " + std::to_string(bits) +
                          "-bit affine weights with group size " + std::to_string(group_size));
    }
    if (rows <= 0 || cols <= 0 || cols % group_size != 0 || rows > (int64_t{1} << 30) ||
        cols > (int64_t{1} << 30)) {
        throw_invalid(std::string("[") + what + "] matrix shape [" + std::to_string(rows) + ", " +
                      std::to_string(cols) + "] is empty or cols is not a multiple of " +
                      std::to_string(group_size));
    }
}

void check_rows(const char* what, int n_rows) {
    if (n_rows < 1 || n_rows > kMaxGemvRows) {
        throw_invalid(std::string("[") + what + "] n_rows " + std::to_string(n_rows) +
                      " (expected 1.." + std::to_string(kMaxGemvRows) + ")");
    }
}

bool aligned(const void* pointer, size_t alignment) {
    return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

constexpr int64_t kMmaDenseMinRows = 8192;

// x [R, cols] goes through shared memory up to this size (cols 6144 at 4 rows; 2 blocks per SM);
// wider inputs read device memory.
constexpr size_t kMaxSharedXBytes = size_t{96} << 10;

template <int Bits, int R, Mode M>
void launch_one(dim3 grid, const GemvParams& params, cudaStream_t stream) {
    const size_t x_bytes =
        size_t{R} * static_cast<size_t>(params.n_pieces) * kPieceCols * sizeof(float);
    if (x_bytes <= kMaxSharedXBytes) {
        auto* kernel = affine_gemv_kernel<Bits, R, M, true>;
        if (x_bytes > (size_t{48} << 10)) {
            CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(x_bytes)));
        }
        launch_dependent(kernel, grid, dim3(kThreads), x_bytes, stream, params);
    } else {
        launch_dependent(affine_gemv_kernel<Bits, R, M, false>, grid, dim3(kThreads), 0, stream,
                         params);
    }
}

template <Mode M>
void launch(int bits, int n_rows, dim3 grid, const GemvParams& params, cudaStream_t stream) {
    // Runtime (bits, rows) → template arguments, once per call.
    auto with_rows = [&](auto bits_constant) {
        constexpr int kBits = decltype(bits_constant)::value;
        switch (n_rows) {
            case 1: launch_one<kBits, 1, M>(grid, params, stream); break;
            case 2: launch_one<kBits, 2, M>(grid, params, stream); break;
            case 3: launch_one<kBits, 3, M>(grid, params, stream); break;
            case 4: launch_one<kBits, 4, M>(grid, params, stream); break;
            default: throw_internal("[affine_gemv] unchecked row count");
        }
    };
    switch (bits) {
        case 2: with_rows(std::integral_constant<int, 2>{}); break;
        case 3: with_rows(std::integral_constant<int, 3>{}); break;
        case 4: with_rows(std::integral_constant<int, 4>{}); break;
        case 8: with_rows(std::integral_constant<int, 8>{}); break;
        default: throw_internal("[affine_gemv] unchecked bit width");
    }
    CHERENKOV_CUDA_CHECK(cudaGetLastError());
}

// Blocks covering `rows` output rows when each sub-warp produces `rows_per_sub` of them.
unsigned blocks_for(int rows, int lanes, int rows_per_sub) {
    const int rows_per_block = kWarpsPerBlock * (32 / lanes) * rows_per_sub;
    return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
}

}  // namespace

bool affine_gemv_supports(int bits, int group_size) {
    return supported(bits, group_size);
}

void affine_gemv(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows, float* y,
                 size_t y_stride, void* stream) {
    check_shape("affine_gemv", w.rows, w.cols, w.bits, w.group_size);
    check_rows("affine_gemv", n_rows);
    if (w.codes == nullptr || w.scales == nullptr || w.biases == nullptr || x == nullptr ||
        y == nullptr) {
        throw_invalid("[affine_gemv] null pointer");
    }
    if (!aligned(w.codes, 16) || !aligned(x, 16) || x_stride % 4 != 0) {
        throw_invalid(
            "[affine_gemv] codes and x must be 16-byte aligned and x_stride a multiple of 4");
    }
    if (n_rows > 1 &&
        (x_stride < static_cast<size_t>(w.cols) || y_stride < static_cast<size_t>(w.rows))) {
        throw_invalid("[affine_gemv] x_stride < cols or y_stride < rows");
    }
    // On Hopper the bulk-loaded kernel takes every shape it can lay out (all of a launch's weights
    // in flight at once, and copied before the previous kernel ends). Elsewhere the tensor-core
    // kernel wins on tall matrices (H200: [10240, 2560] Q4 at 2/4 rows 12.5/16.1 µs against
    // 17.7/21.9); on short ones ([2560, 6144], [640, 2560]) its few tile sets leave the GPU
    // emptier than the FMA kernel's sub-warps do, and it is slower.
    if (bulk_gemv_takes(w.bits, w.group_size, w.rows, w.cols, n_rows)) {
        bulk_gemv_dense(w, x, x_stride, n_rows, y, y_stride, static_cast<cudaStream_t>(stream));
        return;
    }
    if (w.rows >= kMmaDenseMinRows && mma_gemv_takes(w.bits, w.group_size, w.cols, n_rows)) {
        mma_gemv_dense(w, x, x_stride, n_rows, y, y_stride, static_cast<cudaStream_t>(stream));
        return;
    }
    GemvParams p{};
    p.codes = w.codes;
    p.scales = w.scales;
    p.biases = w.biases;
    p.rows = static_cast<int>(w.rows);
    p.n_pieces = static_cast<int>(w.cols / kPieceCols);
    p.group_shift = group_shift_for(w.group_size);
    p.lanes = lanes_for(p.n_pieces);
    p.x = x;
    p.x_stride = x_stride;
    p.y = y;
    p.y_stride = y_stride;
    const dim3 grid(blocks_for(p.rows, p.lanes, kRowsPerLane), 1);
    launch<Mode::Dense>(w.bits, n_rows, grid, p, static_cast<cudaStream_t>(stream));
}

namespace {

// The gate/up launch (h[e][t] = silu(gate_e·x_t) ⊙ up_e·x_t) and the down launch
// (part[e][t] = down_e·h[e][t]) over an address table of n_experts ≥ 1 experts (of which the
// first *n_in_use when n_in_use is not null).
void queue_expert_parts(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                        const float* x, int n_rows, float* h, float* part, cudaStream_t cs,
                        const int* n_in_use = nullptr) {
    const auto hidden = static_cast<size_t>(shape.hidden);
    const auto inter = static_cast<size_t>(shape.intermediate);
    if (layer_experts_take(shape, n_rows)) {
        layer_experts_parts(shape, table, n_experts, x, n_rows, h, part, cs, n_in_use);
        return;
    }
    if (bulk_experts_take(shape, n_rows)) {
        bulk_experts_gate_up(shape, table, n_experts, x, n_rows, h, cs, n_in_use);
        bulk_experts_down(shape, table, n_experts, h, n_rows, part, cs, n_in_use);
        return;
    }
    if (mma_gemv_takes(shape.bits, shape.group_size, shape.hidden, n_rows) &&
        mma_gemv_takes(shape.bits, shape.group_size, shape.intermediate, n_rows)) {
        mma_experts_gate_up(shape, table, n_experts, x, n_rows, h, cs, n_in_use);
        mma_experts_down(shape, table, n_experts, h, n_rows, part, cs, n_in_use);
        return;
    }
    GemvParams gate_up{};
    gate_up.table = table;
    gate_up.n_in_use = n_in_use;
    gate_up.rows = static_cast<int>(inter);
    gate_up.n_pieces = static_cast<int>(hidden / kPieceCols);
    gate_up.group_shift = group_shift_for(shape.group_size);
    gate_up.lanes = lanes_for(gate_up.n_pieces);
    gate_up.x = x;
    gate_up.x_stride = hidden;
    gate_up.y = h;
    gate_up.y_stride = inter;
    gate_up.y_expert_stride = n_rows * inter;
    launch<Mode::GateUp>(shape.bits, n_rows,
                         dim3(blocks_for(gate_up.rows, gate_up.lanes, kRowsPerLane / 2),
                              static_cast<unsigned>(n_experts)),
                         gate_up, cs);

    GemvParams down{};
    down.table = table;
    down.n_in_use = n_in_use;
    down.rows = static_cast<int>(hidden);
    down.n_pieces = static_cast<int>(inter / kPieceCols);
    down.group_shift = group_shift_for(shape.group_size);
    down.lanes = lanes_for(down.n_pieces);
    down.x = h;
    down.x_stride = inter;
    down.x_expert_stride = n_rows * inter;
    down.y = part;
    down.y_stride = hidden;
    down.y_expert_stride = n_rows * hidden;
    launch<Mode::Down>(
        shape.bits, n_rows,
        dim3(blocks_for(down.rows, down.lanes, kRowsPerLane), static_cast<unsigned>(n_experts)),
        down, cs);
}

}  // namespace

void affine_experts_swiglu_parts(const ExpertShape& shape, const ExpertAddress* table,
                                 int n_experts, const float* x, int n_rows, float* h_scratch,
                                 float* parts, void* stream, const int* n_in_use) {
    check_shape("affine_experts_swiglu_parts", shape.intermediate, shape.hidden, shape.bits,
                shape.group_size);
    check_shape("affine_experts_swiglu_parts", shape.hidden, shape.intermediate, shape.bits,
                shape.group_size);
    check_rows("affine_experts_swiglu_parts", n_rows);
    if (n_experts < 0 || n_experts > 65535) {
        throw_invalid("[affine_experts_swiglu_parts] n_experts " + std::to_string(n_experts));
    }
    if (n_experts == 0) return;
    if (table == nullptr || x == nullptr || h_scratch == nullptr || parts == nullptr) {
        throw_invalid("[affine_experts_swiglu_parts] null pointer");
    }
    if (!aligned(x, 16) || !aligned(h_scratch, 16)) {
        throw_invalid("[affine_experts_swiglu_parts] x and h_scratch must be 16-byte aligned");
    }
    queue_expert_parts(shape, table, n_experts, x, n_rows, h_scratch, parts,
                       static_cast<cudaStream_t>(stream), n_in_use);
}

}  // namespace cherenkov::engine::cuda
