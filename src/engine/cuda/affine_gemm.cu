// Prefill matmuls (affine_gemm.h): y[T, N] = x[T, K]·W[N, K]ᵀ, tiled SIMT float32, for the
// shapes and layouts the tensor-core GEMM (expert_gemm.cu) does not take.
//   * A block computes an output tile of kBN = 128 weight rows × BM tokens (BM = 32, 64 or 128,
//     chosen per shape) and walks K in steps of kBK = 32 columns: one 32-column "piece" of every
//     weight row, which lies in one quantization group (groups are 32, 64 or 128 columns).
//   * Per step, the W tile is dequantized (w = scale·q + bias, float32) into shared memory as
//     Ws[k][n], and the x tile is copied as Xs[t][k] with cp.async; both are double-buffered, and
//     the next step's codes wait in registers while the current step is multiplied, so one
//     __syncthreads per step suffices.
//   * Threads form a 16 × (BM/TOK) grid; each owns 8 weight rows × TOK tokens in registers (rows
//     tn·4 + {0..3} and 64 + tn·4 + {0..3}, so a warp's float4 reads of Ws are contiguous;
//     tokens 4 apart between the two tm of a warp, so their Xs reads fall 16 banks apart).
//   * Every output element is one accumulator that sums k = 0, 1, … K−1 in order with fmaf, so the
//     result depends on nothing but the inputs (not on BM, the grid or the device).
// Float32 weights use the same kernel with a loader that copies instead of dequantizing; 1-4
// rows of them go through f32_gemv_kernel (warps along each weight row, xor-butterfly sums).
// Both kernels are launched with launch_dependent (dependent_launch.cuh); weights, which no
// kernel writes, may be read before wait_for_previous_kernel(), x and y only after it.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/cuda/affine_gemm.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kBN = 128;                // weight rows per block tile
constexpr int kBK = 32;                 // columns per K step (one piece)
constexpr int kXStride = kBK + 4;       // floats per token row of Xs: 16-byte rows, banks staggered
constexpr int kRowsPerThread = 8;       // weight rows of a thread's micro-tile
constexpr int kMaxTokens = 65535 * 32;  // grid.y limit at the smallest token tile

struct GemmParams {
    // Affine weights (AffineTile) ...
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;
    int group_shift;  // log2(group_size / 32)
    // ... or float32 weights (F32Tile).
    const float* w;
    bool w_vec;  // W rows may be read as float4 (data 16-byte aligned, cols % 4 == 0)
    int rows;
    int cols;
    int n_pieces;    // ceil(cols / 32)
    const float* x;  // [n_tokens, x_stride]
    size_t x_stride;
    bool x_vec;  // x may be copied 16 bytes at a time (16-byte aligned, x_stride % 4 == 0)
    int n_tokens;
    float* y;  // [n_tokens, y_stride]
    size_t y_stride;
};

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Code i of a piece's little-endian bit stream (i a compile-time constant after unrolling), as
// an exact float: OR-ed under the exponent of 2^23 it reads as 2^23 + q, and one FADD leaves q.
template <int Bits>
__device__ __forceinline__ float code_value(const uint32_t (&words)[Bits], int i) {
    constexpr uint32_t kMask = (1U << Bits) - 1;
    const int bit = i * Bits;
    const int word = bit / 32;
    const int shift = bit % 32;
    uint32_t q = words[word] >> shift;
    if (shift + Bits > 32) q |= words[word + 1] << (32 - shift);  // 3 bits: across two words
    return __uint_as_float(0x4B000000U | (q & kMask)) - 8388608.0F;
}

// ---- cp.async (sm_80+): global → shared without registers; src_bytes < size zero-fills ----
__device__ __forceinline__ void cp_async_16(float* shared, const float* global, int src_bytes) {
    const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_4(float* shared, const float* global, int src_bytes) {
    const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// ---- W tile producers. Thread (row r, part) of a block with Split threads per weight row loads
// piece `piece` of its row into Regs (issued before the multiply of the previous step), then
// writes columns k = part·32/Split … of Ws[k][r] (a warp writes 32 consecutive r: no conflicts).

// MLX-affine weights: the piece's Bits code words and its group's BF16 scale and bias.
template <int Bits>
struct AffineTile {
    template <int Split>
    struct Regs {
        uint32_t codes[Bits];
        uint16_t scale;
        uint16_t bias;
    };

    const uint8_t* codes;  // the row's piece 0
    const uint16_t* scales;
    const uint16_t* biases;
    int group_shift;

    __device__ AffineTile(const GemmParams& p, int row) : group_shift(p.group_shift) {
        const size_t row_bytes = static_cast<size_t>(p.n_pieces) * 4 * Bits;
        const size_t row_groups = static_cast<size_t>(p.n_pieces >> p.group_shift);
        codes = p.codes + static_cast<size_t>(row) * row_bytes;
        scales = p.scales + static_cast<size_t>(row) * row_groups;
        biases = p.biases + static_cast<size_t>(row) * row_groups;
    }

    // Affine K is a multiple of 32, so every piece < n_pieces is whole.
    template <int Split>
    __device__ __forceinline__ void load(Regs<Split>& r, int piece, int /*part*/) const {
        const uint8_t* src = codes + static_cast<size_t>(piece) * (4 * Bits);
        if constexpr (Bits == 2) {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(src));
            r.codes[0] = v.x;
            r.codes[1] = v.y;
        } else if constexpr (Bits == 3) {  // 12 bytes: only 4-byte alignment is guaranteed
            const auto* q = reinterpret_cast<const unsigned int*>(src);
            r.codes[0] = __ldg(q);
            r.codes[1] = __ldg(q + 1);
            r.codes[2] = __ldg(q + 2);
        } else {
            static_assert(Bits == 4 || Bits == 8);
#pragma unroll
            for (int v = 0; v < Bits / 4; ++v) {
                const uint4 u = __ldg(reinterpret_cast<const uint4*>(src) + v);
                r.codes[4 * v + 0] = u.x;
                r.codes[4 * v + 1] = u.y;
                r.codes[4 * v + 2] = u.z;
                r.codes[4 * v + 3] = u.w;
            }
        }
        r.scale = __ldg(scales + (piece >> group_shift));
        r.bias = __ldg(biases + (piece >> group_shift));
    }

    // column: &Ws[0][r].
    template <int Split>
    __device__ __forceinline__ void store(const Regs<Split>& r, int part, float* column) const {
        if constexpr (Split == 1) {
            store_codes<0, 32>(r, column);
        } else {
            static_assert(Split == 2);
            if (part == 0) {  // warp-uniform: parts are whole groups of kBN threads
                store_codes<0, 16>(r, column);
            } else {
                store_codes<16, 16>(r, column);
            }
        }
    }

    template <int First, int Count, int Split>
    __device__ __forceinline__ static void store_codes(const Regs<Split>& r, float* column) {
        const float scale = bf16_bits_to_float(r.scale);
        const float bias = bf16_bits_to_float(r.bias);
#pragma unroll
        for (int i = First; i < First + Count; ++i) {
            column[i * kBN] = fmaf(scale, code_value<Bits>(r.codes, i), bias);
        }
    }
};

// Float32 weights: 32/Split floats of the row, zero past cols (K need not be a multiple of 32).
struct F32Tile {
    template <int Split>
    struct Regs {
        float v[kBK / Split];
    };

    const float* row;
    int cols;
    bool vec;

    __device__ F32Tile(const GemmParams& p, int r)
        : row(p.w + static_cast<size_t>(r) * static_cast<size_t>(p.cols)),
          cols(p.cols),
          vec(p.w_vec) {}

    template <int Split>
    __device__ __forceinline__ void load(Regs<Split>& r, int piece, int part) const {
        constexpr int kCount = kBK / Split;
        const int k = piece * kBK + part * kCount;
        if (vec && k + kCount <= cols) {
#pragma unroll
            for (int q = 0; q < kCount / 4; ++q) {
                const float4 f = __ldg(reinterpret_cast<const float4*>(row + k) + q);
                r.v[4 * q + 0] = f.x;
                r.v[4 * q + 1] = f.y;
                r.v[4 * q + 2] = f.z;
                r.v[4 * q + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < kCount; ++e) r.v[e] = k + e < cols ? __ldg(row + k + e) : 0.0F;
        }
    }

    template <int Split>
    __device__ __forceinline__ void store(const Regs<Split>& r, int part, float* column) const {
        constexpr int kCount = kBK / Split;
#pragma unroll
        for (int e = 0; e < kCount; ++e) column[(part * kCount + e) * kBN] = r.v[e];
    }
};

// Token (row of Xs) of element j of thread tm's micro-tile: 4 consecutive tokens, and with 8 a
// second 4 at +BM/2.
template <int BM>
__device__ __forceinline__ int tile_token(int tm, int j) {
    return (j / 4) * (BM / 2) + tm * 4 + j % 4;
}

// Weight row (column of Ws) of element i of thread tn's micro-tile.
__device__ __forceinline__ int tile_row(int tn, int i) {
    return (i / 4) * (kBN / 2) + tn * 4 + i % 4;
}

// Copies x[t0 .. t0+BM)[k0 .. k0+32) into Xs[BM][kXStride]. Tokens past the end repeat the last
// one (their sums are never stored); columns past cols are zero-filled.
template <int BM, int Threads>
__device__ __forceinline__ void load_x_tile(const GemmParams& p, float* xs, int t0, int k0,
                                            int tid) {
    constexpr int kChunksPerRow = kBK / 4;
    constexpr int kChunks = BM * kChunksPerRow;
    static_assert(kChunks % Threads == 0);
#pragma unroll
    for (int it = 0; it < kChunks / Threads; ++it) {
        const int c = tid + it * Threads;
        const int t = c / kChunksPerRow;
        const int k = k0 + (c % kChunksPerRow) * 4;
        const int token = min(t0 + t, p.n_tokens - 1);
        const float* src = p.x + static_cast<size_t>(token) * p.x_stride + k;
        float* dst = xs + t * kXStride + (c % kChunksPerRow) * 4;
        const int valid = max(0, min(4, p.cols - k));
        if (p.x_vec) {
            cp_async_16(dst, valid > 0 ? src : p.x, valid * 4);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                cp_async_4(dst + e, e < valid ? src + e : p.x, e < valid ? 4 : 0);
        }
    }
}

// acc[i][j] += Σ_{k<32} Ws[k][row i]·Xs[token j][k], k ascending.
template <int BM, int TOK>
__device__ __forceinline__ void multiply_tile(const float* ws, const float* xs, int tn, int tm,
                                              float (&acc)[kRowsPerThread][TOK]) {
#pragma unroll
    for (int k = 0; k < kBK; k += 2) {
        float2 xv[TOK];
#pragma unroll
        for (int j = 0; j < TOK; ++j) {
            xv[j] = *reinterpret_cast<const float2*>(xs + tile_token<BM>(tm, j) * kXStride + k);
        }
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const float4 a = *reinterpret_cast<const float4*>(ws + (k + kk) * kBN + tn * 4);
            const float4 b =
                *reinterpret_cast<const float4*>(ws + (k + kk) * kBN + kBN / 2 + tn * 4);
            const float w[kRowsPerThread] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
                for (int j = 0; j < TOK; ++j) {
                    acc[i][j] = fmaf(w[i], kk == 0 ? xv[j].x : xv[j].y, acc[i][j]);
                }
            }
        }
    }
}

template <int BM, int TOK>
constexpr int kGemmThreads = 16 * (BM / TOK);

template <int BM>
constexpr size_t kGemmSharedBytes = 2 * (size_t{kBK} * kBN + size_t{BM} * kXStride) * sizeof(float);

// One block: output rows [blockIdx.x·128, +128) × tokens [blockIdx.y·BM, +BM).
template <typename Tile, int BM, int TOK>
__global__ void __launch_bounds__(kGemmThreads<BM, TOK>, (BM == 128 ? 1 : 2))
    gemm_kernel(const GemmParams p) {
    constexpr int kThreads = kGemmThreads<BM, TOK>;
    constexpr int kSplit = kThreads / kBN;  // producer threads per weight row
    static_assert(kSplit * kBN == kThreads && (kSplit == 1 || kSplit == 2));
    constexpr int kWsFloats = kBK * kBN;
    constexpr int kStageFloats = kWsFloats + BM * kXStride;  // one buffer: Ws then Xs

    extern __shared__ float4 shared4[];
    float* const shared = reinterpret_cast<float*>(shared4);
    const int tid = static_cast<int>(threadIdx.x);
    const int n0 = static_cast<int>(blockIdx.x) * kBN;
    const int t0 = static_cast<int>(blockIdx.y) * BM;

    // Producer role: rows past the end load the last row (valid memory; never stored).
    const int w_row = tid % kBN;
    const int w_part = tid / kBN;
    const Tile tile(p, min(n0 + w_row, p.rows - 1));
    typename Tile::template Regs<kSplit> regs;

    // The first weight piece is loaded while the previous kernel finishes; x is its output.
    tile.template load<kSplit>(regs, 0, w_part);
    wait_for_previous_kernel();
    allow_next_kernel();
    load_x_tile<BM, kThreads>(p, shared + kWsFloats, t0, 0, tid);
    cp_async_commit();
    tile.template store<kSplit>(regs, w_part, shared + w_row);
    cp_async_wait_all();
    __syncthreads();

    const int tn = tid % 16;
    const int tm = tid / 16;
    float acc[kRowsPerThread][TOK];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < TOK; ++j) acc[i][j] = 0.0F;
    }

    for (int step = 0; step < p.n_pieces; ++step) {
        const float* ws = shared + (step & 1) * kStageFloats;
        float* next = shared + ((step + 1) & 1) * kStageFloats;
        const bool has_next = step + 1 < p.n_pieces;  // block-uniform
        if (has_next) {
            tile.template load<kSplit>(regs, step + 1, w_part);
            load_x_tile<BM, kThreads>(p, next + kWsFloats, t0, (step + 1) * kBK, tid);
            cp_async_commit();
        }
        multiply_tile<BM, TOK>(ws, ws + kWsFloats, tn, tm, acc);
        if (has_next) {
            // `next` was last read in step − 1, which every thread finished before the barrier.
            tile.template store<kSplit>(regs, w_part, next + w_row);
            cp_async_wait_all();
        }
        __syncthreads();
    }

#pragma unroll
    for (int j = 0; j < TOK; ++j) {
        const int t = t0 + tile_token<BM>(tm, j);
        if (t >= p.n_tokens) continue;
        float* y = p.y + static_cast<size_t>(t) * p.y_stride;
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
            const int row = n0 + tile_row(tn, i);
            if (row < p.rows) y[row] = acc[i][j];
        }
    }
}

// ---- float32 GEMV for 1-4 rows ----
constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;

struct F32GemvParams {
    const float* w;  // [rows, cols]
    int rows;
    int cols;
    int split;  // warps per weight row: 1, 2, 4 or 8
    const float* x;
    size_t x_stride;
    float* y;
    size_t y_stride;
};

// Warp `part` of a row's `split` warps takes float4 columns part·32 + lane, stride split·32 (or
// single floats without alignment); lanes reduce by xor butterfly, then one thread adds the
// split partials in order: a fixed order for each shape.
template <int R, bool kVec>
__global__ void __launch_bounds__(kGemvThreads) f32_gemv_kernel(const F32GemvParams p) {
    __shared__ float partial[kGemvWarps][R];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int rows_per_block = kGemvWarps / p.split;
    const int local_row = warp / p.split;
    const int part = warp % p.split;
    const int row = static_cast<int>(blockIdx.x) * rows_per_block + local_row;

    float acc[R];
#pragma unroll
    for (int t = 0; t < R; ++t) acc[t] = 0.0F;
    if (row < p.rows) {  // warp-uniform
        const float* w = p.w + static_cast<size_t>(row) * static_cast<size_t>(p.cols);
        const int stride = p.split * 32;
        if constexpr (kVec) {
            const int n4 = p.cols / 4;
#pragma unroll 4
            for (int c4 = part * 32 + lane; c4 < n4; c4 += stride) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(w) + c4);
#pragma unroll
                for (int t = 0; t < R; ++t) {
                    const float4 b =
                        __ldg(reinterpret_cast<const float4*>(p.x + t * p.x_stride) + c4);
                    acc[t] = fmaf(a.x, b.x, acc[t]);
                    acc[t] = fmaf(a.y, b.y, acc[t]);
                    acc[t] = fmaf(a.z, b.z, acc[t]);
                    acc[t] = fmaf(a.w, b.w, acc[t]);
                }
            }
        } else {
#pragma unroll 4
            for (int c = part * 32 + lane; c < p.cols; c += stride) {
                const float a = __ldg(w + c);
#pragma unroll
                for (int t = 0; t < R; ++t)
                    acc[t] = fmaf(a, __ldg(p.x + t * p.x_stride + c), acc[t]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < R; ++t) {
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
            acc[t] += __shfl_xor_sync(0xFFFFFFFFU, acc[t], offset);
        }
    }
    if (lane == 0) {
#pragma unroll
        for (int t = 0; t < R; ++t) partial[warp][t] = acc[t];
    }
    __syncthreads();
    const int index = static_cast<int>(threadIdx.x);
    if (index >= rows_per_block * R) return;
    const int out_local = index / R;
    const int t = index % R;
    const int out_row = static_cast<int>(blockIdx.x) * rows_per_block + out_local;
    if (out_row >= p.rows) return;
    float sum = 0.0F;
    for (int s = 0; s < p.split; ++s) sum += partial[out_local * p.split + s][t];
    p.y[t * p.y_stride + out_row] = sum;
}

// ---- host side ----

bool aligned(const void* pointer, size_t alignment) {
    return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

template <typename Tile, int BM, int TOK>
void launch_gemm(const GemmParams& p, cudaStream_t stream) {
    auto* kernel = gemm_kernel<Tile, BM, TOK>;
    constexpr size_t kShared = kGemmSharedBytes<BM>;
    if constexpr (kShared > (size_t{48} << 10)) {
        CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared)));
    }
    const dim3 grid(static_cast<unsigned>((p.rows + kBN - 1) / kBN),
                    static_cast<unsigned>((p.n_tokens + BM - 1) / BM));
    launch_dependent(kernel, grid, dim3(kGemmThreads<BM, TOK>), kShared, stream, p);
}

template <typename Tile>
void launch_tiles(int tokens_per_tile, const GemmParams& p, cudaStream_t stream) {
    switch (tokens_per_tile) {
        case 32: launch_gemm<Tile, 32, 4>(p, stream); break;
        case 64: launch_gemm<Tile, 64, 4>(p, stream); break;
        case 128: launch_gemm<Tile, 128, 8>(p, stream); break;
        default: throw_internal("[affine_gemm] unknown token tile");
    }
}

int64_t padded(int64_t n, int64_t tile) {
    return (n + tile - 1) / tile * tile;
}

// Tokens per block tile: the largest of 128 and 64 that pads the token count by at most 1/8
// more than 32 would and still gives at least two blocks per SM; else 32 (more, smaller blocks).
// Any choice gives the same bits (each output sums in the same order).
int tokens_per_tile(int64_t n_tokens, int64_t rows) {
    int device = 0;
    int n_sms = 0;
    CHERENKOV_CUDA_CHECK(cudaGetDevice(&device));
    CHERENKOV_CUDA_CHECK(cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t row_tiles = (rows + kBN - 1) / kBN;
    for (const int tile : {128, 64}) {
        const bool little_padding = padded(n_tokens, tile) * 8 <= padded(n_tokens, 32) * 9;
        const bool enough_blocks = row_tiles * ((n_tokens + tile - 1) / tile) >= 2 * n_sms;
        if (little_padding && enough_blocks) return tile;
    }
    return 32;
}

void check_tokens(const char* what, int64_t n_rows, size_t x_stride, size_t y_stride, int64_t rows,
                  int64_t cols) {
    if (n_rows < 0 || n_rows > kMaxTokens) {
        throw_invalid(std::string("[") + what + "] n_rows " + std::to_string(n_rows) +
                      " (expected 0.." + std::to_string(kMaxTokens) + ")");
    }
    if (n_rows > 1 &&
        (x_stride < static_cast<size_t>(cols) || y_stride < static_cast<size_t>(rows))) {
        throw_invalid(std::string("[") + what + "] x_stride " + std::to_string(x_stride) +
                      " < cols " + std::to_string(cols) + " or y_stride " +
                      std::to_string(y_stride) + " < rows " + std::to_string(rows));
    }
}

int group_shift_for(int group_size) {
    return group_size == 32 ? 0 : group_size == 64 ? 1 : 2;
}

template <int R>
void launch_f32_gemv(const F32GemvParams& p, bool vec, cudaStream_t stream) {
    const int rows_per_block = kGemvWarps / p.split;
    const dim3 grid(static_cast<unsigned>((p.rows + rows_per_block - 1) / rows_per_block));
    auto* kernel = vec ? f32_gemv_kernel<R, true> : f32_gemv_kernel<R, false>;
    launch_dependent(kernel, grid, dim3(kGemvThreads), 0, stream, p);
}

// Warps per weight row: enough to put ~2048 warps in flight on small matrices (a [1, 2560] gate
// still spreads over 8 warps), no more than the row has 32-lane float4 sweeps.
int gemv_split(int64_t rows, int64_t cols) {
    const int64_t sweeps = (cols + 127) / 128;
    int split = 1;
    while (split < kGemvWarps && rows * split < 2048 && split < sweeps) split *= 2;
    return split;
}

}  // namespace

void affine_gemm(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows,
                 float* y, size_t y_stride, void* stream) {
    if (!affine_gemv_supports(w.bits, w.group_size)) {
        throw_unsupported("[affine_gemm] " + std::to_string(w.bits) +
                          "-bit affine weights with group size " + std::to_string(w.group_size));
    }
    if (w.rows <= 0 || w.cols <= 0 || w.cols % w.group_size != 0 || w.rows > (int64_t{1} << 30) ||
        w.cols > (int64_t{1} << 30)) {
        throw_invalid("[affine_gemm] matrix shape [" + std::to_string(w.rows) + ", " +
                      std::to_string(w.cols) + "] is empty or cols is not a multiple of " +
                      std::to_string(w.group_size));
    }
    check_tokens("affine_gemm", n_rows, x_stride, y_stride, w.rows, w.cols);
    if (n_rows == 0) return;
    if (w.codes == nullptr || w.scales == nullptr || w.biases == nullptr || x == nullptr ||
        y == nullptr) {
        throw_invalid("[affine_gemm] null pointer");
    }
    const size_t code_alignment = w.bits == 3 ? 4 : w.bits == 2 ? 8 : 16;
    if (!aligned(w.codes, code_alignment) || !aligned(w.scales, 2) || !aligned(w.biases, 2)) {
        throw_invalid("[affine_gemm] codes must be " + std::to_string(code_alignment) +
                      "-byte aligned at " + std::to_string(w.bits) + " bits");
    }
    if (affine_gemm_tensor_cores_take(w, x, x_stride)) {
        affine_gemm_tensor_cores(w, x, x_stride, n_rows, y, y_stride, stream);
        return;
    }
    GemmParams p{};
    p.codes = w.codes;
    p.scales = w.scales;
    p.biases = w.biases;
    p.group_shift = group_shift_for(w.group_size);
    p.rows = static_cast<int>(w.rows);
    p.cols = static_cast<int>(w.cols);
    p.n_pieces = static_cast<int>(w.cols / kBK);
    p.x = x;
    p.x_stride = x_stride;
    p.x_vec = aligned(x, 16) && x_stride % 4 == 0;
    p.n_tokens = static_cast<int>(n_rows);
    p.y = y;
    p.y_stride = y_stride;
    const int tile = tokens_per_tile(n_rows, w.rows);
    const auto cs = static_cast<cudaStream_t>(stream);
    switch (w.bits) {  // runtime bits → template argument, once per call
        case 2: launch_tiles<AffineTile<2>>(tile, p, cs); break;
        case 3: launch_tiles<AffineTile<3>>(tile, p, cs); break;
        case 4: launch_tiles<AffineTile<4>>(tile, p, cs); break;
        case 8: launch_tiles<AffineTile<8>>(tile, p, cs); break;
        default: throw_internal("[affine_gemm] unchecked bit width");
    }
}

void f32_matmul(const DeviceF32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
                size_t y_stride, void* stream) {
    if (w.rows <= 0 || w.cols <= 0 || w.rows > (int64_t{1} << 30) || w.cols > (int64_t{1} << 30)) {
        throw_invalid("[f32_matmul] matrix shape [" + std::to_string(w.rows) + ", " +
                      std::to_string(w.cols) + "]");
    }
    check_tokens("f32_matmul", n_rows, x_stride, y_stride, w.rows, w.cols);
    if (n_rows == 0) return;
    if (w.data == nullptr || x == nullptr || y == nullptr) {
        throw_invalid("[f32_matmul] null pointer");
    }
    const auto cs = static_cast<cudaStream_t>(stream);
    const bool w_vec = aligned(w.data, 16) && w.cols % 4 == 0;
    const bool x_vec = aligned(x, 16) && (n_rows == 1 || x_stride % 4 == 0);
    if (n_rows <= kMaxGemvRows) {
        F32GemvParams p{};
        p.w = w.data;
        p.rows = static_cast<int>(w.rows);
        p.cols = static_cast<int>(w.cols);
        p.split = gemv_split(w.rows, w.cols);
        p.x = x;
        p.x_stride = x_stride;
        p.y = y;
        p.y_stride = y_stride;
        const bool vec = w_vec && x_vec;
        switch (n_rows) {
            case 1: launch_f32_gemv<1>(p, vec, cs); break;
            case 2: launch_f32_gemv<2>(p, vec, cs); break;
            case 3: launch_f32_gemv<3>(p, vec, cs); break;
            default: launch_f32_gemv<4>(p, vec, cs); break;
        }
        return;
    }
    GemmParams p{};
    p.w = w.data;
    p.w_vec = w_vec;
    p.rows = static_cast<int>(w.rows);
    p.cols = static_cast<int>(w.cols);
    p.n_pieces = static_cast<int>((w.cols + kBK - 1) / kBK);
    p.x = x;
    p.x_stride = x_stride;
    p.x_vec = aligned(x, 16) && x_stride % 4 == 0;
    p.n_tokens = static_cast<int>(n_rows);
    p.y = y;
    p.y_stride = y_stride;
    launch_tiles<F32Tile>(tokens_per_tile(n_rows, w.rows), p, cs);
}

}  // namespace cherenkov::engine::cuda
