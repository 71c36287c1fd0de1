// Grouped tensor-core GEMM for the routed experts of a prefill call (expert_gemm.h). A block
// computes one (token tile, 64- or 128-row block) of one expert: the tile's ≤ 16 (row, slot)
// indices come from the counting-sorted slot list, so tokens are grouped by expert and each
// expert's weights are read once per token tile.
//
// The mma mapping is affine_gemv_mma.cu's (verified on the H200): mma.sync m16n8k16 with A = 16
// weight rows × 16 columns of exact bf16 codes, lane c owning the c-th quarter of every group,
// a decoded word's register pairs r[2s], r[2s+1] feeding k-pairs {2c, 2c+1} and {2c+8, 2c+9},
// so the B entry of lane (g, c) for that step is (x[a], x[a+D]), (x[a+1], x[a+D+1]) with a = the
// word's first column + 2s and D = 16/Bits. What differs is the n dimension: here n = 8 tokens
// (token nb·8 + g in lane g's B fragment), and x_hi and x_lo are two mmas into one accumulator.
// Why not the decode kernel's slots n = 2t (hi) / 2t + 1 (lo): that layout also costs two mmas
// per A fragment for 8 tokens, but holds two accumulators per token; with n = tokens a lane's C
// fragment is directly rows {g, g+8} × tokens {2c, 2c+1}, 4 floats per 8 tokens.
//
// Per group the float32 epilogue adds scale·Σqx + bias·Σx (as the CPU's group sums), so no mma
// against ones is spent per warp. x is staged once per launch, before the GEMM, by
// stage_x_kernel: every x row the launch reads becomes its B fragments (bf16 hi, lo, in the order
// a lane reads them) and its Σx per group, in global memory. Why: a GEMM block used to convert
// its tokens' x itself, with blocking loads every warp of the block waited on at once, for every
// row block again; now it gathers ready fragments with cp.async (no registers, no stall) into a
// double-buffered shared chunk of 256 columns × 16 tokens (32 for a dense matrix), the next
// chunk in flight while this one is multiplied, one barrier per chunk. Each output is summed by one
// lane in ascending group order; nothing depends on the grid or on which tokens share a tile. The
// kernels wait for the previous kernel before touching memory and are launched with
// launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "engine/cuda/affine_mma.cuh"
#include "engine/cuda/cp_async.cuh"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;
constexpr int kTiles = 2;  // 16-row mma tiles per warp: gate and up of 16 rows, or 32 down rows
constexpr int kTokenBlocks = kExpertTokenTile / 8;  // mma n-blocks of 8 tokens of an expert tile
// A dense tile's n-blocks: a matrix's whole token range shares the weights, so a block takes
// more tokens than an expert's tile and decodes each weight once for all of them.
constexpr int kDenseTokenBlocks = 4;
// Columns of x staged per chunk: 16 KB of B fragments for 16 tokens (32 KB for a dense tile of
// 32), 33 KB (66 KB) per block with the second buffer; registers decide the blocks per SM.
constexpr int kChunkCols = 256;
constexpr int kChunkSteps = kChunkCols / 16;
constexpr int kMaxChunkGroups = kChunkCols / 64;
// Groups of weight loads in flight per lane. Two stages are ~24-48 registers; a third would
// spill next to the 32 accumulator registers of a 16-token tile.
constexpr int kDepth = 2;

// Dense: one matrix, tiles of kDenseTokenBlocks·8 consecutive tokens (affine_gemm_tensor_cores).
enum class Mode { GateUp, Down, Dense };

// Output rows of one row block of the grid.
template <Mode M>
constexpr int kBlockRows = kWarps * (M == Mode::GateUp ? kTileRows : kTiles * kTileRows);

// x as the GEMM reads it (stage_x_kernel writes it): per staged row, for every k16 step, the B
// fragment entries of the four lane quarters c, hi then lo (8 uint2: 64 bytes), and Σx of every
// group. Staged row r of x: GateUp mix row r; Down position r of the slot list (the row
// slots[r] of h); Dense x row r.
struct StagedX {
    const uint2* fragments;  // [rows][n_steps][hi, lo][4]
    const float* sums;       // [rows][n_groups]
};

struct Params {
    const ExpertAddress* table;
    const ExpertTokenTile* tiles;
    const int32_t* slots;
    const uint8_t* codes;  // Dense: the matrix
    const uint16_t* scales;
    const uint16_t* biases;
    int n_tokens;       // Dense: tokens (x rows) in the call
    int rows;           // output rows of one matrix (GateUp: intermediate, Down: hidden)
    int n_groups;       // input columns / G
    StagedX x;          // GateUp: mix [T, hidden]; Down: h [T·k, intermediate]
    int x_row_divisor;  // GateUp: index i reads mix row i / top
    float* y;           // row i: GateUp h [T·k, intermediate]; Down parts [T·k, hidden]
    int y_stride;
    const int32_t* tile_count;  // null, or tiles in use (device): blocks past it return
    // Dense with a column split (dense_column_splits): block z sums groups [z·split_groups,
    // (z + 1)·split_groups) into y + z·split_stride; 0: no split.
    int split_groups;
    size_t split_stride;
};

template <int Bits, int G>
struct CodeShape : CodeLayout<Bits, G> {
    static constexpr int kChunkGroups = kChunkCols / G;
    static_assert(kChunkGroups % kDepth == 0, "a chunk starts at a stage-ring boundary");
};

// One chunk of x for the tile's tokens: b[step][n-block][hi, lo][lane] is the B fragment lane
// (g, c) of that n-block reads (token nb·8 + g), and x_sum[group][token] the group's Σx.
template <int TB>
struct SharedChunk {
    uint2 b[kChunkSteps][TB][2][32];
    float x_sum[kMaxChunkGroups][TB * 8];
};

struct StageParams {
    const float* x;
    int x_stride;
    int n_groups;
    // Null: block b stages x row b as staged row b. Else block b stages tile b: x row slots[first
    // + j] as staged row first + j, for j < count (the Down launch's positions).
    const ExpertTokenTile* tiles;
    const int32_t* slots;
    uint2* fragments;
    float* sums;
    // With tiles: null, or the number of tiles in use, written on the device (the grid is an
    // upper bound: blocks past it return).
    const int32_t* tile_count = nullptr;
};

// grid: x rows or tiles; block: kThreads. Entry (row j, step s, quarter c) holds x[a], x[a + 1],
// x[a + P], x[a + P + 1] (P = 16/Bits) as bf16 hi and as the lo of what hi leaves, a being the
// column lane quarter c multiplies by the step's codes. A tile's rows are spread over the
// threads together, so their loads are in flight at once.
template <int Bits, int G>
__global__ void __launch_bounds__(kThreads) stage_x_kernel(const StageParams p) {
    using S = CodeShape<Bits, G>;
    wait_for_previous_kernel();
    allow_next_kernel();
    int first = static_cast<int>(blockIdx.x);
    int count = 1;
    if (p.tiles != nullptr) {
        if (p.tile_count != nullptr && static_cast<int>(blockIdx.x) >= *p.tile_count) return;
        const ExpertTokenTile tile = p.tiles[blockIdx.x];
        first = tile.first;
        count = tile.count;
    }
    const auto x_row = [&](int j) -> const float* {
        const int row = p.tiles == nullptr ? first : p.slots[first + j];
        return p.x + static_cast<size_t>(row) * p.x_stride;
    };
    const int n_steps = p.n_groups * S::kStepsPerGroup;
    const int entries = n_steps * 4;
    for (int e = static_cast<int>(threadIdx.x); e < count * entries; e += kThreads) {
        const int j = e / entries;
        const int c = e & 3;
        const int s = (e - j * entries) >> 2;
        const int group = s / S::kStepsPerGroup;
        const int in_group = s % S::kStepsPerGroup;
        const int a = group * G + c * (G / 4) + in_group / S::kStepsPerWord * S::kCodesPerWord +
                      2 * (in_group % S::kStepsPerWord);
        const float* xr = x_row(j);
        const float2 lead = *reinterpret_cast<const float2*>(xr + a);
        const float2 pair = *reinterpret_cast<const float2*>(xr + a + S::kPairOffset);
        uint2 hi, lo;
        hi.x = pack_bf16x2(lead.x, pair.x);
        hi.y = pack_bf16x2(lead.y, pair.y);
        lo.x = pack_bf16x2(lead.x - bf16_low(hi.x), pair.x - bf16_high(hi.x));
        lo.y = pack_bf16x2(lead.y - bf16_low(hi.y), pair.y - bf16_high(hi.y));
        uint2* fragments = p.fragments + (static_cast<size_t>(first + j) * n_steps + s) * 8;
        fragments[c] = hi;
        fragments[4 + c] = lo;
    }
    // Σx of a group: each quarter summed in column order, then (q0 + q1) + (q2 + q3).
    for (int e = static_cast<int>(threadIdx.x); e < count * p.n_groups; e += kThreads) {
        const int j = e / p.n_groups;
        const int group = e - j * p.n_groups;
        const float* xr = x_row(j);
        float q[4];
#pragma unroll
        for (int quarter = 0; quarter < 4; ++quarter) {
            const auto* xq = reinterpret_cast<const float4*>(xr + group * G + quarter * (G / 4));
            float sum = 0.0F;
#pragma unroll
            for (int v = 0; v < G / 16; ++v) {
                const float4 f = xq[v];
                sum += f.x;
                sum += f.y;
                sum += f.z;
                sum += f.w;
            }
            q[quarter] = sum;
        }
        p.sums[static_cast<size_t>(first + j) * p.n_groups + group] = (q[0] + q[1]) + (q[2] + q[3]);
    }
}

// Queues the copies of groups [group0, group0 + n_groups) of the tile's staged rows into `sc`
// (one cp.async commit group per thread, committed by the caller). Tokens past the tile's count
// read its first token's row: their sums are never stored.
template <int Bits, int G, int TB>
__device__ __forceinline__ void load_chunk(SharedChunk<TB>& sc, const StagedX& x, int n_steps,
                                           int n_groups_total, const int32_t* rows, int n_tokens,
                                           int group0, int n_groups) {
    using S = CodeShape<Bits, G>;
    const int token_shift = 31 - __clz(n_tokens);  // n_tokens: 8, 16 or 32
    const int step0 = group0 * S::kStepsPerGroup;
    // (half, part, token, step) from the lowest bits up: a thread copies 16 bytes, four threads
    // one (row, step), and eight tokens of a (step, part) fill 256 contiguous shared bytes.
    const int entries = (n_groups * S::kStepsPerGroup * 4) << token_shift;
    for (int e = static_cast<int>(threadIdx.x); e < entries; e += kThreads) {
        const int half = e & 1;
        const int part = (e >> 1) & 1;
        const int token = (e >> 2) & (n_tokens - 1);
        const int s = (e >> 2) >> token_shift;
        const uint2* src = x.fragments +
                           (static_cast<size_t>(rows[token]) * n_steps + step0 + s) * 8 + part * 4 +
                           half * 2;
        copy_16_kept(&sc.b[s][token >> 3][part][(token & 7) * 4 + half * 2], src);
    }
    for (int e = static_cast<int>(threadIdx.x); e < (n_groups << token_shift); e += kThreads) {
        const int token = e & (n_tokens - 1);
        const int group = e >> token_shift;
        copy_4(&sc.x_sum[group][token],
               x.sums + static_cast<size_t>(rows[token]) * n_groups_total + group0 + group);
    }
}

// grid: (tiles, row blocks); block: kThreads. Warp w of row block y owns the row set
// y·kWarps + w: 16 rows of gate and of up (GateUp) or 32 rows of down (Down).
// TB mma n-blocks of 8 tokens per tile: kTokenBlocks for an expert's tile, kDenseTokenBlocks for
// a dense one. ptxas (CUDA 13, -Xptxas -v, sm_90): 144-162 registers with TB = 2, under the
// 168 that 3 blocks per SM allow, and 188-221 with TB = 4 (2 blocks per SM), no spills; the two
// chunk buffers are dynamic shared memory.
template <int Bits, int G, Mode M, int TB>
__global__ void __launch_bounds__(kThreads, TB == 2 ? 3 : 2) expert_gemm_kernel(const Params p) {
    using S = CodeShape<Bits, G>;
    constexpr int kTile = TB * 8;
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) uint8_t dynamic_shared[];
    auto* chunk = reinterpret_cast<SharedChunk<TB>*>(dynamic_shared);  // two buffers
    __shared__ int32_t x_rows[kTile];                                  // staged rows (StagedX)
    __shared__ int32_t out_rows[kTile];
    wait_for_previous_kernel();
    allow_next_kernel();

    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2;
    const int c = lane & 3;
    ExpertTokenTile tile;
    if constexpr (M == Mode::Dense) {
        tile.expert = 0;
        tile.first = static_cast<int32_t>(blockIdx.x) * kTile;
        tile.count = min(kTile, p.n_tokens - tile.first);
    } else {
        if (p.tile_count != nullptr && static_cast<int>(blockIdx.x) >= *p.tile_count) return;
        tile = p.tiles[blockIdx.x];
    }
    // A tile of ≤ 8 tokens skips the second n-block, one of ≤ 16 the third and fourth
    // (block-uniform).
    const int n_token_blocks = tile.count > 16 ? TB : (tile.count > 8 ? 2 : 1);
    if (threadIdx.x < kTile) {
        // Tokens past the count stand in with the first token's row (never stored).
        const int token =
            static_cast<int>(threadIdx.x) < tile.count ? static_cast<int>(threadIdx.x) : 0;
        const int32_t position = tile.first + token;
        const int32_t i = M == Mode::Dense ? position : p.slots[position];
        x_rows[threadIdx.x] = M == Mode::GateUp ? i / p.x_row_divisor : position;
        out_rows[threadIdx.x] = i;
    }

    constexpr int kSetRows = M == Mode::GateUp ? kTileRows : kTiles * kTileRows;
    const int row0 = (static_cast<int>(blockIdx.y) * kWarps + warp) * kSetRows;
    const bool active = row0 < p.rows;  // warp-uniform; idle warps still stage x and sync

    LaneRows<kTiles> rp;
    const size_t row_bytes = static_cast<size_t>(p.n_groups) * S::kGroupBytes;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
        const uint8_t* codes = p.codes;
        const uint16_t* scales = p.scales;
        const uint16_t* biases = p.biases;
        int tile_row0 = row0 + t * kTileRows;
        if constexpr (M == Mode::Down) {
            const ExpertAddress& address = p.table[tile.expert];
            codes = address.down_codes;
            scales = address.down_scales;
            biases = address.down_biases;
        } else if constexpr (M == Mode::GateUp) {
            const ExpertAddress& address = p.table[tile.expert];
            codes = t == 0 ? address.gate_codes : address.up_codes;
            scales = t == 0 ? address.gate_scales : address.up_scales;
            biases = t == 0 ? address.gate_biases : address.up_biases;
            tile_row0 = row0;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // Rows past the end read the last row (valid memory); their sums are never stored.
            const size_t row = static_cast<size_t>(min(tile_row0 + g + 8 * h, p.rows - 1));
            rp.codes[t][h] = codes + row * row_bytes + c * S::kChunkWords * 4;
            rp.scales[t][h] = scales + row * p.n_groups;
            rp.biases[t][h] = biases + row * p.n_groups;
        }
    }

    // The block's groups: all of them, or its split's (whole chunks, so stage d still holds the
    // groups ≡ d mod kDepth).
    int first_group = 0;
    int last_group = p.n_groups;  // one past
    float* y_base = p.y;
    if constexpr (M == Mode::Dense) {
        if (p.split_groups > 0) {
            first_group = static_cast<int>(blockIdx.z) * p.split_groups;
            last_group = min(first_group + p.split_groups, p.n_groups);
            y_base += blockIdx.z * p.split_stride;
        }
    }

    // Weight loads first: their latency covers the first chunk's staging.
    GroupStage<Bits, G, kTiles> stage[kDepth];
    if (active) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) load_stage(stage[d], rp, first_group + d, last_group);
    }
    __syncthreads();  // x_rows
    const int n_tokens = n_token_blocks * 8;
    const int n_steps = p.n_groups * S::kStepsPerGroup;
    load_chunk<Bits, G, TB>(chunk[0], p.x, n_steps, p.n_groups, x_rows, n_tokens, first_group,
                            min(S::kChunkGroups, last_group - first_group));
    commit_copies();
    wait_copies<0>();
    __syncthreads();

    float total[kTiles][TB][4] = {};
    const int n_chunks = (last_group - first_group + S::kChunkGroups - 1) / S::kChunkGroups;
    for (int ch = 0; ch < n_chunks; ++ch) {
        const int group0 = first_group + ch * S::kChunkGroups;
        const int group_end = min(group0 + S::kChunkGroups, last_group);
        // The other buffer was last read in chunk ch − 1, which every warp finished before the
        // barrier at the end of that iteration.
        if (ch + 1 < n_chunks) {
            load_chunk<Bits, G, TB>(chunk[(ch + 1) & 1], p.x, n_steps, p.n_groups, x_rows, n_tokens,
                                    group_end, min(S::kChunkGroups, last_group - group_end));
        }
        commit_copies();
        const SharedChunk<TB>& sc = chunk[ch & 1];
        for (int base = group0; active && base < group_end; base += kDepth) {
#pragma unroll
            for (int d = 0; d < kDepth; ++d) {
                const int group = base + d;
                if (group >= group_end) break;
                GroupStage<Bits, G, kTiles>& st = stage[d];
                // Keep this group's codes and parameters, then refill the stage with the group
                // kDepth ahead before any arithmetic, so its loads overlap this group's work.
                uint32_t words[kTiles][2][S::kChunkWords];
                float scale[kTiles][2], bias[kTiles][2];
                unpack_stage(st, words, scale, bias);
                load_stage(st, rp, group + kDepth, last_group);

                // A fresh accumulator per group: Σ q·(x_hi + x_lo) over the group's columns.
                float acc[kTiles][TB][4] = {};
                const int step0 = (group - group0) * S::kStepsPerGroup;
#pragma unroll
                for (int w = 0; w < S::kChunkWords; ++w) {
                    uint32_t a[kTiles][2][S::kRegsPerWord];
#pragma unroll
                    for (int t = 0; t < kTiles; ++t) {
                        decode_word<Bits>(words[t][0][w], a[t][0]);
                        decode_word<Bits>(words[t][1][w], a[t][1]);
                    }
#pragma unroll
                    for (int s = 0; s < S::kStepsPerWord; ++s) {
                        const int step = step0 + w * S::kStepsPerWord + s;
#pragma unroll
                        for (int nb = 0; nb < TB; ++nb) {
                            if (nb >= n_token_blocks) break;
                            const uint2 hi = sc.b[step][nb][0][lane];
                            const uint2 lo = sc.b[step][nb][1][lane];
#pragma unroll
                            for (int t = 0; t < kTiles; ++t) {
                                mma_bf16(acc[t][nb], a[t][0][2 * s], a[t][1][2 * s],
                                         a[t][0][2 * s + 1], a[t][1][2 * s + 1], hi.x, hi.y);
                                mma_bf16(acc[t][nb], a[t][0][2 * s], a[t][1][2 * s],
                                         a[t][0][2 * s + 1], a[t][1][2 * s + 1], lo.x, lo.y);
                            }
                        }
                    }
                }
                // C fragment: acc[2h + j] is row g + 8h, token nb·8 + 2c + j.
#pragma unroll
                for (int nb = 0; nb < TB; ++nb) {
                    if (nb >= n_token_blocks) break;
                    const float2 x_sum =
                        *reinterpret_cast<const float2*>(&sc.x_sum[group - group0][nb * 8 + 2 * c]);
#pragma unroll
                    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
#pragma unroll
                            for (int j = 0; j < 2; ++j) {
                                float& out = total[t][nb][2 * h + j];
                                out = fmaf(scale[t][h], acc[t][nb][2 * h + j], out);
                                out = fmaf(bias[t][h], j == 0 ? x_sum.x : x_sum.y, out);
                            }
                        }
                    }
                }
            }
        }
        wait_copies<0>();
        __syncthreads();
    }

    if (!active) return;
#pragma unroll
    for (int nb = 0; nb < TB; ++nb) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int token = nb * 8 + 2 * c + j;
            if (token >= tile.count) continue;
            float* y = y_base + static_cast<size_t>(out_rows[token]) * p.y_stride;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if constexpr (M == Mode::GateUp) {
                    const int row = row0 + g + 8 * h;
                    if (row < p.rows)
                        y[row] = silu_f(total[0][nb][2 * h + j]) * total[1][nb][2 * h + j];
                } else {
#pragma unroll
                    for (int t = 0; t < kTiles; ++t) {
                        const int row = row0 + t * kTileRows + g + 8 * h;
                        if (row < p.rows) y[row] = total[t][nb][2 * h + j];
                    }
                }
            }
        }
    }
#else
    __trap();  // mma.sync with bf16 needs sm_80; expert_gemm_takes() keeps older devices away
#endif
}

// y[t·y_stride + r] = Σ_z partial[z·split_stride + t·rows + r] for z < n_splits, in increasing z
// (the column splits of a dense matrix, dense_column_splits). grid: ceil(n_tokens·rows / threads).
__global__ void sum_splits_kernel(const float* partial, int n_splits, size_t split_stride,
                                  int rows, int64_t n, float* y, size_t y_stride) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t t = i / rows;
    float sum = partial[i];
    for (int z = 1; z < n_splits; ++z) sum += partial[static_cast<size_t>(z) * split_stride + i];
    y[static_cast<size_t>(t) * y_stride + static_cast<size_t>(i - t * rows)] = sum;
}

// Column splits of a dense matrix whose rows alone give the grid fewer than 8 row blocks (the
// hyper-connection projections: 4 to a few hundred rows of 10,240 columns), so that a prefill
// chunk's 16-odd token tiles still fill the GPU: at 512 tokens such a matrix ran as 16 blocks
// of a 132-multiprocessor card. Whole chunks per split. A function of the shape only, never of
// the token count, so each output's order of summation stays fixed by the shape.
struct ColumnSplits {
    int splits = 1;
    int split_groups = 0;  // 0: no split
};

ColumnSplits dense_column_splits(int rows, int n_groups, int group_size) {
    constexpr int kMinRowBlocks = 8;
    const int row_blocks = (rows + kBlockRows<Mode::Dense> - 1) / kBlockRows<Mode::Dense>;
    const int chunk_groups = kChunkCols / group_size;
    const int chunks = (n_groups + chunk_groups - 1) / chunk_groups;
    const int wanted = std::min((kMinRowBlocks + row_blocks - 1) / row_blocks, chunks);
    if (row_blocks >= kMinRowBlocks || wanted < 2) return {};
    const int chunks_per_split = (chunks + wanted - 1) / wanted;
    const int split_groups = chunks_per_split * chunk_groups;
    return {(n_groups + split_groups - 1) / split_groups, split_groups};
}

// x staged for one launch (StagedX): `rows` staged rows of `cols` columns.
class StagedXBuffer {
public:
    StagedXBuffer(int64_t rows, int64_t cols, int group_size, cudaStream_t stream)
        : fragments_(static_cast<size_t>(rows * cols / 2), stream),  // 4 bytes a column
          sums_(static_cast<size_t>(rows * (cols / group_size)), stream) {}
    StageParams params(const float* x, int x_stride, int n_groups) const {
        return StageParams{x,       x_stride,          n_groups,    nullptr,
                           nullptr, fragments_.data(), sums_.data()};
    }

private:
    DeviceScratch<uint2> fragments_;
    DeviceScratch<float> sums_;
};

// Stages x (stage_x_kernel over `stage_blocks` rows or tiles), then launches the GEMM over
// `splits` column splits (Dense only; p.split_groups set).
template <Mode M, int TB = kTokenBlocks>
void launch(int bits, int group_size, int n_tiles, const StageParams& stage, int stage_blocks,
            Params p, cudaStream_t stream, int splits = 1) {
    const int row_blocks = (p.rows + kBlockRows<M> - 1) / kBlockRows<M>;
    const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(row_blocks),
                    static_cast<unsigned>(splits));
    p.x = StagedX{stage.fragments, stage.sums};
    // Runtime (bits, group) → template arguments, once per launch.
    auto with = [&](auto bits_c, auto group_c) {
        constexpr int kB = decltype(bits_c)::value;
        constexpr int kG = decltype(group_c)::value;
        launch_dependent(stage_x_kernel<kB, kG>, dim3(static_cast<unsigned>(stage_blocks)),
                         dim3(kThreads), 0, stream, stage);
        constexpr size_t kShared = 2 * sizeof(SharedChunk<TB>);
        // Set at every launch, as affine_gemm.cu does: the attribute belongs to the current
        // device's context, so a value remembered per process would miss a second device.
        if constexpr (kShared > (size_t{48} << 10)) {
            CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(expert_gemm_kernel<kB, kG, M, TB>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                      static_cast<int>(kShared)));
        }
        launch_dependent(expert_gemm_kernel<kB, kG, M, TB>, grid, dim3(kThreads), kShared, stream,
                         p);
    };
    with_code_shape(bits, group_size, "expert_gemm", with);
}

bool aligned(const void* pointer, size_t alignment) {
    return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// The launchers' contract: a supported shape, whole groups, 16-byte x rows, int-sized strides.
void check(const ExpertGemmTiles& tiles, const float* x, const float* y, const char* what) {
    const ExpertShape& s = tiles.shape;
    const std::string name = std::string("[") + what + "] ";
    if (!mma_code_shape(s.bits, s.group_size)) {
        throw_invalid(name + "bits " + std::to_string(s.bits) + " with group " +
                      std::to_string(s.group_size) + " has no grouped kernel");
    }
    if (s.hidden <= 0 || s.intermediate <= 0 || s.hidden % s.group_size != 0 ||
        s.intermediate % s.group_size != 0 || s.hidden > (int64_t{1} << 21) ||
        s.intermediate > (int64_t{1} << 21)) {
        throw_invalid(name + "hidden " + std::to_string(s.hidden) + " and intermediate " +
                      std::to_string(s.intermediate) + " must be positive multiples of the group");
    }
    if (tiles.n_tiles < 0) throw_invalid(name + "negative tile count");
    if (tiles.n_tiles > 0 && (tiles.n_slots < 1 || tiles.n_slots > (int64_t{1} << 30))) {
        throw_invalid(name + "the slot list's length " + std::to_string(tiles.n_slots) +
                      " must be 1 to 2^30");
    }
    if (tiles.n_tiles > 0 && (tiles.table == nullptr || tiles.tiles == nullptr ||
                              tiles.slots == nullptr || x == nullptr || y == nullptr)) {
        throw_invalid(name + "null device pointer");
    }
    if (!aligned(x, 16)) throw_invalid(name + "x must be 16-byte aligned");
}

}  // namespace

bool expert_gemm_takes(const ExpertShape& shape) {
    return mma_code_shape(shape.bits, shape.group_size) && shape.hidden % shape.group_size == 0 &&
           shape.intermediate % shape.group_size == 0 &&
           kernel_policy().compute_major >= 8;  // bf16 mma.sync
}

void expert_gemm_gate_up(const ExpertGemmTiles& tiles, const float* mix, int top, float* h,
                         void* stream) {
    check(tiles, mix, h, "expert_gemm_gate_up");
    if (top < 1 || tiles.n_slots % top != 0) {
        throw_invalid("[expert_gemm_gate_up] top " + std::to_string(top) +
                      " does not divide the slot list's length " + std::to_string(tiles.n_slots));
    }
    if (tiles.n_tiles == 0) return;
    const ExpertShape& s = tiles.shape;
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    Params p{};
    p.table = tiles.table;
    p.tiles = tiles.tiles;
    p.slots = tiles.slots;
    p.rows = static_cast<int>(s.intermediate);
    p.n_groups = static_cast<int>(s.hidden / s.group_size);
    p.x_row_divisor = top;
    p.y = h;
    p.y_stride = static_cast<int>(s.intermediate);
    p.tile_count = tiles.tile_count;
    // Every token's mix row, once: the tiles read each about `top` times.
    const int64_t n_rows = tiles.n_slots / top;
    const StagedXBuffer staged(n_rows, s.hidden, s.group_size, cuda_stream);
    launch<Mode::GateUp>(s.bits, s.group_size, tiles.n_tiles,
                         staged.params(mix, static_cast<int>(s.hidden), p.n_groups),
                         static_cast<int>(n_rows), p, cuda_stream);
}

void expert_gemm_down(const ExpertGemmTiles& tiles, const float* h, float* parts, void* stream) {
    check(tiles, h, parts, "expert_gemm_down");
    if (tiles.n_tiles == 0) return;
    const ExpertShape& s = tiles.shape;
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    Params p{};
    p.table = tiles.table;
    p.tiles = tiles.tiles;
    p.slots = tiles.slots;
    p.rows = static_cast<int>(s.hidden);
    p.n_groups = static_cast<int>(s.intermediate / s.group_size);
    p.x_row_divisor = 1;
    p.y = parts;
    p.y_stride = static_cast<int>(s.hidden);
    p.tile_count = tiles.tile_count;
    // Only the launch's tiles' rows of h, by their positions in the slot list.
    const StagedXBuffer staged(tiles.n_slots, s.intermediate, s.group_size, cuda_stream);
    StageParams stage = staged.params(h, static_cast<int>(s.intermediate), p.n_groups);
    stage.tiles = tiles.tiles;
    stage.slots = tiles.slots;
    stage.tile_count = tiles.tile_count;
    launch<Mode::Down>(s.bits, s.group_size, tiles.n_tiles, stage, tiles.n_tiles, p, cuda_stream);
}

bool affine_gemm_tensor_cores_take(const DeviceAffineMatrix& w, const float* x, size_t x_stride) {
    const KernelPolicy& policy = kernel_policy();
    // Σx and the B fragments read x rows as float4 and float2; the grid has ≤ 65535 row blocks.
    return policy.gemm_mma && mma_code_shape(w.bits, w.group_size) && w.cols % w.group_size == 0 &&
           w.cols <= (int64_t{1} << 21) && w.rows >= 1 &&
           w.rows <= int64_t{65535} * kWarps * kTiles * kTileRows && aligned(x, 16) &&
           x_stride % 4 == 0 && x_stride <= (size_t{1} << 30) && policy.compute_major >= 8;
}

void affine_gemm_tensor_cores(const DeviceAffineMatrix& w, const float* x, size_t x_stride,
                              int64_t n_rows, float* y, size_t y_stride, void* stream) {
    if (!affine_gemm_tensor_cores_take(w, x, x_stride)) {
        throw_invalid("[affine_gemm_tensor_cores] shape or layout not taken");
    }
    if (n_rows < 0 || n_rows > (int64_t{1} << 30) || y_stride < static_cast<size_t>(w.rows) ||
        y_stride > (size_t{1} << 30) || x_stride < static_cast<size_t>(w.cols)) {
        throw_invalid("[affine_gemm_tensor_cores] bad row count or stride");
    }
    if (n_rows == 0) return;
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    Params p{};
    p.codes = w.codes;
    p.scales = w.scales;
    p.biases = w.biases;
    p.n_tokens = static_cast<int>(n_rows);
    p.rows = static_cast<int>(w.rows);
    p.n_groups = static_cast<int>(w.cols / w.group_size);
    p.x_row_divisor = 1;
    p.y = y;
    p.y_stride = static_cast<int>(y_stride);
    const StagedXBuffer staged(n_rows, w.cols, w.group_size, cuda_stream);
    constexpr int kDenseTile = kDenseTokenBlocks * 8;
    const auto n_tiles = static_cast<int>((n_rows + kDenseTile - 1) / kDenseTile);
    const StageParams stage = staged.params(x, static_cast<int>(x_stride), p.n_groups);
    const ColumnSplits split = dense_column_splits(p.rows, p.n_groups, w.group_size);
    if (split.splits == 1) {
        launch<Mode::Dense, kDenseTokenBlocks>(w.bits, w.group_size, n_tiles, stage,
                                               static_cast<int>(n_rows), p, cuda_stream);
        return;
    }
    // Each split's sums into its own [n_rows, rows] partial, then one pass adds them.
    const int64_t n_out = n_rows * w.rows;
    DeviceScratch<float> partial(static_cast<size_t>(split.splits * n_out), cuda_stream);
    p.y = partial.data();
    p.y_stride = p.rows;
    p.split_groups = split.split_groups;
    p.split_stride = static_cast<size_t>(n_out);
    launch<Mode::Dense, kDenseTokenBlocks>(w.bits, w.group_size, n_tiles, stage,
                                           static_cast<int>(n_rows), p, cuda_stream, split.splits);
    constexpr int kSumThreads = 256;
    launch_dependent(sum_splits_kernel,
                     dim3(static_cast<unsigned>((n_out + kSumThreads - 1) / kSumThreads)),
                     dim3(kSumThreads), 0, cuda_stream, partial.data(), split.splits,
                     static_cast<size_t>(n_out), p.rows, n_out, y, y_stride);
}

}  // namespace cherenkov::engine::cuda
