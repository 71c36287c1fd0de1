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
// Per group the float32 epilogue adds scale·Σqx + bias·Σx, with Σx per (token, group) summed in
// float32 from x when the block stages its chunk (as the CPU's group sums), so no mma against
// ones is spent per warp. Shared memory holds B fragments (bf16 hi, lo) of 256 columns × 16
// tokens, double-buffered: one __syncthreads per chunk, the next chunk built while this one is
// multiplied. Each output is summed by one lane in ascending group order; nothing depends on the
// grid or on which tokens share a tile. The kernel waits for the previous kernel before touching
// memory and is launched with launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "base/error.h"
#include "engine/cuda/affine_mma.cuh"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;
constexpr int kTiles = 2;  // 16-row mma tiles per warp: gate and up of 16 rows, or 32 down rows
constexpr int kTokenBlocks = kExpertTokenTile / 8;  // mma n-blocks of 8 tokens
// Columns of x staged per chunk: 16 KB of B fragments for 16 tokens, 33 KB per block with the
// second buffer, so shared memory allows 6 blocks per SM and registers decide (3).
constexpr int kChunkCols = 256;
constexpr int kChunkSteps = kChunkCols / 16;
constexpr int kMaxChunkGroups = kChunkCols / 64;
// Groups of weight loads in flight per lane. Two stages are ~24-48 registers; a third would
// spill next to the 32 accumulator registers of a 16-token tile.
constexpr int kDepth = 2;

// Dense: one matrix, tiles of 16 consecutive tokens (affine_gemm_tensor_cores).
enum class Mode { GateUp, Down, Dense };

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
    const float* x;     // GateUp: mix [T, hidden]; Down: h [T·k, intermediate]
    int x_row_divisor;  // index i reads x row i / x_row_divisor (GateUp: top; Down: 1)
    int x_stride;
    float* y;  // row i: GateUp h [T·k, intermediate]; Down parts [T·k, hidden]
    int y_stride;
};

template <int Bits, int G>
struct CodeShape : CodeLayout<Bits, G> {
    static constexpr int kChunkGroups = kChunkCols / G;
    static_assert(kChunkGroups % kDepth == 0, "a chunk starts at a stage-ring boundary");
};

// One chunk of x for the tile's tokens: b[step][n-block][hi, lo][lane] is the B fragment lane
// (g, c) of that n-block reads (token nb·8 + g), and x_sum[group][token] the group's Σx.
struct SharedChunk {
    uint2 b[kChunkSteps][kTokenBlocks][2][32];
    float x_sum[kMaxChunkGroups][kExpertTokenTile];
};

// Stages groups [group0, group0 + n_groups) of x for tokens < n_tokens (a multiple of 8; tokens
// past `count` read as zeros). All threads of the block take part.
template <int Bits, int G>
__device__ __forceinline__ void build_chunk(SharedChunk& sc, const float* const* x_rows, int count,
                                            int n_tokens, int group0, int n_groups) {
    using S = CodeShape<Bits, G>;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    // Consecutive threads write consecutive uint2 of one (step, n-block, part): no bank conflicts.
    const int entries = n_groups * S::kStepsPerGroup * n_tokens * 4;
    for (int e = static_cast<int>(threadIdx.x); e < entries; e += kThreads) {
        const int c = e & 3;
        const int token = (e >> 2) % n_tokens;
        const int s = (e >> 2) / n_tokens;
        const int group = group0 + s / S::kStepsPerGroup;
        const int in_group = s % S::kStepsPerGroup;
        const int a = group * G + c * (G / 4) + in_group / S::kStepsPerWord * S::kCodesPerWord +
                      2 * (in_group % S::kStepsPerWord);
        uint2 hi = make_uint2(0, 0);
        uint2 lo = make_uint2(0, 0);
        if (token < count) {
            const float* xr = x_rows[token];
            const float2 first = *reinterpret_cast<const float2*>(xr + a);
            const float2 second = *reinterpret_cast<const float2*>(xr + a + S::kPairOffset);
            hi.x = pack_bf16x2(first.x, second.x);
            hi.y = pack_bf16x2(first.y, second.y);
            lo.x = pack_bf16x2(first.x - bf16_low(hi.x), second.x - bf16_high(hi.x));
            lo.y = pack_bf16x2(first.y - bf16_low(hi.y), second.y - bf16_high(hi.y));
        }
        const int slot = (token & 7) * 4 + c;
        sc.b[s][token >> 3][0][slot] = hi;
        sc.b[s][token >> 3][1][slot] = lo;
    }
    // Σx of each (group, token): four lanes sum a quarter each in column order, then
    // (q0 + q1) + (q2 + q3). The loop bound is warp-uniform so every lane reaches the shuffles.
    const int quarters = n_groups * n_tokens * 4;
    for (int base = warp * 32; base < quarters; base += kThreads) {
        const int e = base + lane;
        const int token = (e >> 2) % n_tokens;
        const int group = (e >> 2) / n_tokens;
        float sum = 0.0F;
        if (e < quarters && token < count) {
            const auto* xq = reinterpret_cast<const float4*>(x_rows[token] + (group0 + group) * G +
                                                             (e & 3) * (G / 4));
#pragma unroll
            for (int v = 0; v < G / 16; ++v) {
                const float4 f = xq[v];
                sum += f.x;
                sum += f.y;
                sum += f.z;
                sum += f.w;
            }
        }
        sum += __shfl_xor_sync(0xFFFFFFFFU, sum, 1);
        sum += __shfl_xor_sync(0xFFFFFFFFU, sum, 2);
        if (e < quarters && (e & 3) == 0) sc.x_sum[group][token] = sum;
    }
}

// grid: (tiles, row blocks); block: kThreads. Warp w of row block y owns the row set
// y·kWarps + w: 16 rows of gate and of up (GateUp) or 32 rows of down (Down).
// ptxas (CUDA 13, -Xptxas -v): 136-166 registers on sm_90 and 127-160 on sm_80, no spills,
// 33472 bytes of static shared memory; the bound of 3 blocks per SM caps registers at 168.
template <int Bits, int G, Mode M>
__global__ void __launch_bounds__(kThreads, 3) expert_gemm_kernel(const Params p) {
    using S = CodeShape<Bits, G>;
#if __CUDA_ARCH__ >= 800
    __shared__ SharedChunk chunk[2];
    __shared__ const float* x_rows[kExpertTokenTile];
    __shared__ int32_t out_rows[kExpertTokenTile];
    wait_for_previous_kernel();
    allow_next_kernel();

    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2;
    const int c = lane & 3;
    ExpertTokenTile tile;
    if constexpr (M == Mode::Dense) {
        tile.expert = 0;
        tile.first = static_cast<int32_t>(blockIdx.x) * kExpertTokenTile;
        tile.count = min(kExpertTokenTile, p.n_tokens - tile.first);
    } else {
        tile = p.tiles[blockIdx.x];
    }
    // A tile of ≤ 8 tokens skips the second n-block (block-uniform).
    const int n_token_blocks = tile.count > 8 ? 2 : 1;
    if (threadIdx.x < kExpertTokenTile) {
        const int token = static_cast<int>(threadIdx.x);
        int32_t i = 0;
        if (token < tile.count) {
            i = M == Mode::Dense ? tile.first + token : p.slots[tile.first + token];
        }
        x_rows[token] = p.x + static_cast<size_t>(i / p.x_row_divisor) * p.x_stride;
        out_rows[token] = i;
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

    // Weight loads first: their latency covers the first chunk's staging.
    GroupStage<Bits, G, kTiles> stage[kDepth];
    if (active) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) load_stage(stage[d], rp, d, p.n_groups);
    }
    __syncthreads();  // x_rows
    const int n_tokens = n_token_blocks * 8;
    build_chunk<Bits, G>(chunk[0], x_rows, tile.count, n_tokens, 0,
                         min(S::kChunkGroups, p.n_groups));
    __syncthreads();

    float total[kTiles][kTokenBlocks][4] = {};
    const int n_chunks = (p.n_groups + S::kChunkGroups - 1) / S::kChunkGroups;
    for (int ch = 0; ch < n_chunks; ++ch) {
        const int group0 = ch * S::kChunkGroups;
        const int group_end = min(group0 + S::kChunkGroups, p.n_groups);
        // The other buffer was last read in chunk ch − 1, which every warp finished before the
        // barrier at the end of that iteration.
        if (ch + 1 < n_chunks) {
            build_chunk<Bits, G>(chunk[(ch + 1) & 1], x_rows, tile.count, n_tokens, group_end,
                                 min(S::kChunkGroups, p.n_groups - group_end));
        }
        const SharedChunk& sc = chunk[ch & 1];
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
                load_stage(st, rp, group + kDepth, p.n_groups);

                // A fresh accumulator per group: Σ q·(x_hi + x_lo) over the group's columns.
                float acc[kTiles][kTokenBlocks][4] = {};
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
                        for (int nb = 0; nb < kTokenBlocks; ++nb) {
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
                for (int nb = 0; nb < kTokenBlocks; ++nb) {
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
        __syncthreads();
    }

    if (!active) return;
#pragma unroll
    for (int nb = 0; nb < kTokenBlocks; ++nb) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int token = nb * 8 + 2 * c + j;
            if (token >= tile.count) continue;
            float* y = p.y + static_cast<size_t>(out_rows[token]) * p.y_stride;
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

template <Mode M>
void launch(int bits, int group_size, int n_tiles, const Params& p, cudaStream_t stream) {
    constexpr int kSetRows = M == Mode::GateUp ? kTileRows : kTiles * kTileRows;
    const int row_blocks = (p.rows + kWarps * kSetRows - 1) / (kWarps * kSetRows);
    const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(row_blocks));
    // Runtime (bits, group) → template arguments, once per launch.
    auto with = [&](auto bits_c, auto group_c) {
        constexpr int kB = decltype(bits_c)::value;
        constexpr int kG = decltype(group_c)::value;
        launch_dependent(expert_gemm_kernel<kB, kG, M>, grid, dim3(kThreads), 0, stream, p);
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
    if (top < 1) throw_invalid("[expert_gemm_gate_up] top " + std::to_string(top));
    if (tiles.n_tiles == 0) return;
    const ExpertShape& s = tiles.shape;
    Params p{};
    p.table = tiles.table;
    p.tiles = tiles.tiles;
    p.slots = tiles.slots;
    p.rows = static_cast<int>(s.intermediate);
    p.n_groups = static_cast<int>(s.hidden / s.group_size);
    p.x = mix;
    p.x_row_divisor = top;
    p.x_stride = static_cast<int>(s.hidden);
    p.y = h;
    p.y_stride = static_cast<int>(s.intermediate);
    launch<Mode::GateUp>(s.bits, s.group_size, tiles.n_tiles, p, static_cast<cudaStream_t>(stream));
}

void expert_gemm_down(const ExpertGemmTiles& tiles, const float* h, float* parts, void* stream) {
    check(tiles, h, parts, "expert_gemm_down");
    if (tiles.n_tiles == 0) return;
    const ExpertShape& s = tiles.shape;
    Params p{};
    p.table = tiles.table;
    p.tiles = tiles.tiles;
    p.slots = tiles.slots;
    p.rows = static_cast<int>(s.hidden);
    p.n_groups = static_cast<int>(s.intermediate / s.group_size);
    p.x = h;
    p.x_row_divisor = 1;
    p.x_stride = static_cast<int>(s.intermediate);
    p.y = parts;
    p.y_stride = static_cast<int>(s.hidden);
    launch<Mode::Down>(s.bits, s.group_size, tiles.n_tiles, p, static_cast<cudaStream_t>(stream));
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
    Params p{};
    p.codes = w.codes;
    p.scales = w.scales;
    p.biases = w.biases;
    p.n_tokens = static_cast<int>(n_rows);
    p.rows = static_cast<int>(w.rows);
    p.n_groups = static_cast<int>(w.cols / w.group_size);
    p.x = x;
    p.x_row_divisor = 1;
    p.x_stride = static_cast<int>(x_stride);
    p.y = y;
    p.y_stride = static_cast<int>(y_stride);
    const auto n_tiles = static_cast<int>((n_rows + kExpertTokenTile - 1) / kExpertTokenTile);
    launch<Mode::Dense>(w.bits, w.group_size, n_tiles, p, static_cast<cudaStream_t>(stream));
}

}  // namespace cherenkov::engine::cuda
