// Tensor-core decode GEMV (affine_gemv_mma.h). Why: the FMA kernels of affine_gemv.cu spend
// about 8 instructions per weight (mask, exponent OR, convert FMA, dot FMA, addressing); here
// decoding 8 4-bit codes takes 3 shifts + 4 LOP3 + 4 HFMA2 and the multiply-adds go to the
// tensor cores. Measured on the H200 (bench/gemv_cuda_bench --experts, 48 layers × 10 experts):
// 1150 µs per token at 1 row against 1400 for the FMA kernels (25% of the HBM read bandwidth
// against 21%), 1.5× faster at 2-4 rows. Still latency-bound (see docs/gemv-tensor-core.md).
//
// One mma.sync m16n8k16 (bf16 in, float32 accumulate) takes A = 16 weight rows × 16 columns as
// exact bf16 integers q, and B = 16 columns × 8 "n" slots holding x: slot n = 2t is bf16(x_t)
// (hi), slot 2t + 1 is bf16(x_t − hi) (lo), for input rows t < R ≤ 4; hi + lo keeps ~16 bits of
// x, and both products are exact in float32. Lane (g = lane/4, c = lane%4) ends with
// C[g][2c] + C[g][2c+1] = Σ q·x_c for row g (and row g + 8 in C[g+8][…]).
//
// Column order inside a group is free (the group's sum does not depend on it), so each lane
// reads whole words of its own rows: lane c owns the c-th quarter of every group (G/4 columns,
// one 4/8/16-byte load per row), and the B fragments are built with the same column map. A word
// decodes into bf16x2 registers r[q] = (code q, code q + 16/Bits); step s of the word feeds
// r[2s] and r[2s + 1] as the k-pairs {2c, 2c+1} and {2c+8, 2c+9}. So the B entry of lane c for
// that step is (x[a], x[a + D]) and (x[a + 1], x[a + D + 1]) with a = the word's first column + 2s
// and D = 16/Bits.
//
// Per group the float32 epilogue adds scale·Σqx + bias·Σx (MLX's identity); Σx comes from one
// more mma with A = ones over the same B fragments. Work: a warp owns two 16-row tiles (gate and
// up rows of the same outputs for the expert gate/up launch) over a part of the groups; the
// k_split warps of a tile set add their parts through shared memory in a fixed order, so every
// output's order depends only on the shape (bitwise reproducible). Each warp builds the B
// fragments of its column range in shared memory once, from float x. Launched with
// launch_dependent (dependent_launch.cuh): weight loads start before the previous kernel is done.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "engine/cuda/affine_gemv_mma.h"
#include "engine/cuda/affine_mma.cuh"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;
constexpr int kTiles = 2;  // 16-row tiles per warp
// Per block: the warps' B fragments. 96 KB keeps two blocks per SM; wider x falls back.
constexpr size_t kMaxSharedBytes = size_t{96} << 10;

enum class Mode { Dense, GateUp, Down };

// Groups of loads in flight per lane: stages of 4·kChunkWords codes and 8 parameters each,
// about 32 registers, under the 128-register cap that keeps 4 blocks per SM.
template <int Bits, int G>
constexpr int kDepth = 32 / (4 * CodeLayout<Bits, G>::kChunkWords + 8) > 2
                           ? 32 / (4 * CodeLayout<Bits, G>::kChunkWords + 8)
                           : 2;

struct Params {
    const uint8_t* codes;  // Dense: the matrix. GateUp/Down: taken from table[blockIdx.y].
    const uint16_t* scales;
    const uint16_t* biases;
    const ExpertAddress* table;
    const int* n_in_use;  // GateUp/Down: table entries to compute (device), or null: all
    int rows;             // output rows of one matrix
    int n_groups;         // cols / G
    int k_split;          // warps adding partial sums of one tile set (1, 2 or 4)
    int groups_per_part;  // groups of one warp's column range
    const float* x;       // [R, x_stride] (+ e·x_expert_stride for Down)
    size_t x_stride;
    size_t x_expert_stride;
    float* y;  // [R, y_stride] (+ e·y_expert_stride for GateUp and Down)
    size_t y_stride;
    size_t y_expert_stride;
};

// grid: (blocks over tile sets, n_experts or 1); block: kThreads; dynamic shared memory:
// kWarps · groups_per_part · G/16 · 8R uint2.
template <int Bits, int G, int R, Mode M>
__global__ void __launch_bounds__(kThreads, 4) mma_gemv_kernel(const Params p) {
    using S = CodeLayout<Bits, G>;
#if __CUDA_ARCH__ >= 800
    extern __shared__ uint4 dynamic_shared[];
    __shared__ float partial[kWarps][kTiles][2][32];

    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2;
    const int c = lane & 3;
    const int part = warp % p.k_split;
    const int sets_per_block = kWarps / p.k_split;
    const int set = static_cast<int>(blockIdx.x) * sets_per_block + warp / p.k_split;
    constexpr int kSetRows = M == Mode::GateUp ? kTileRows : kTiles * kTileRows;
    const int row0 = set * kSetRows;
    const bool active = row0 < p.rows;  // warp-uniform
    const int e = static_cast<int>(blockIdx.y);

    const int g0 = part * p.groups_per_part;
    const int g1 = min(p.n_groups, g0 + p.groups_per_part);

    // The gate/up table may have been written by the previous kernel: wait before reading it.
    // Down reads the table gate/up already read (its writer finished before gate/up let this
    // launch start), and weights never change: their loads start before the wait.
    if constexpr (M == Mode::GateUp) wait_for_previous_kernel();
    // Entries past the count may hold anything (down reads the count as it reads the table).
    // Every block waits before it ends, so that this grid's end implies the previous one's.
    if constexpr (M != Mode::Dense) {
        if (p.n_in_use != nullptr && e >= *p.n_in_use) {
            if constexpr (M == Mode::Down) wait_for_previous_kernel();
            return;
        }
    }
    const float* x = p.x;
    float* y = p.y;
    if constexpr (M == Mode::Down) x += e * p.x_expert_stride;
    if constexpr (M != Mode::Dense) y += e * p.y_expert_stride;

    LaneRows<kTiles> rp;
    const size_t row_bytes = static_cast<size_t>(p.n_groups) * S::kGroupBytes;
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
        const uint8_t* codes = p.codes;
        const uint16_t* scales = p.scales;
        const uint16_t* biases = p.biases;
        int tile_row0 = row0 + tile * kTileRows;
        if constexpr (M == Mode::GateUp) {
            const ExpertAddress& a = p.table[e];
            codes = tile == 0 ? a.gate_codes : a.up_codes;
            scales = tile == 0 ? a.gate_scales : a.up_scales;
            biases = tile == 0 ? a.gate_biases : a.up_biases;
            tile_row0 = row0;
        } else if constexpr (M == Mode::Down) {
            const ExpertAddress& a = p.table[e];
            codes = a.down_codes;
            scales = a.down_scales;
            biases = a.down_biases;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // Rows past the end read the last row (valid memory); their sums are never stored.
            const size_t row = static_cast<size_t>(min(tile_row0 + g + 8 * h, p.rows - 1));
            rp.codes[tile][h] = codes + row * row_bytes + c * S::kChunkWords * 4;
            rp.scales[tile][h] = scales + row * p.n_groups;
            rp.biases[tile][h] = biases + row * p.n_groups;
        }
    }

    // Weight loads first: their latency covers the B build.
    GroupStage<Bits, G, kTiles> stage[kDepth<Bits, G>];
    if (active) {
#pragma unroll
        for (int d = 0; d < kDepth<Bits, G>; ++d) load_stage(stage[d], rp, g0 + d, g1);
    }
    // x (Down: gate/up's h) is the previous kernel's output.
    if constexpr (M != Mode::GateUp) wait_for_previous_kernel();
    allow_next_kernel();
    uint2* region = reinterpret_cast<uint2*>(dynamic_shared) +
                    static_cast<size_t>(warp) * p.groups_per_part * S::kStepsPerGroup * 8 * R;
    if (active) build_b<Bits, G, R>(region, x, p.x_stride, g0, g1 - g0, lane, 32);
    __syncwarp();

    float total[kTiles][2] = {};
    if (active) {
        for (int base = g0; base < g1; base += kDepth<Bits, G>) {
#pragma unroll
            for (int d = 0; d < kDepth<Bits, G>; ++d) {
                const int group = base + d;
                if (group >= g1) break;
                GroupStage<Bits, G, kTiles>& st = stage[d];
                // Keep this group's codes and parameters, then refill the stage with the group
                // kDepth ahead before any arithmetic, so its loads overlap this group's work.
                uint32_t words[kTiles][2][S::kChunkWords];
                float scale[kTiles][2], bias[kTiles][2];
                unpack_stage(st, words, scale, bias);
                load_stage(st, rp, group + kDepth<Bits, G>, g1);
                multiply_group<Bits, G, R, kTiles>(
                    words, region + (group - g0) * S::kStepsPerGroup * 8 * R, lane, scale, bias,
                    total);
            }
        }
    }

    if (!add_parts(total, &partial[0][0][0][0], warp, part, p.k_split, lane) || !active) return;
    store_tile_set<R, M == Mode::GateUp>(total, y, p.y_stride, row0, p.rows, lane);
#else
    __trap();  // mma.sync with bf16 needs sm_80; mma_gemv_takes() keeps older devices away
#endif
}

int groups_per_part(int n_groups, int k_split) {
    return (n_groups + k_split - 1) / k_split;
}

// Per block: each warp's B fragments, 8R uint2 per k16 step of its column range.
size_t shared_bytes(int group_size, int n_groups, int n_rows) {
    return size_t{kWarps} * static_cast<size_t>(groups_per_part(n_groups, mma_k_split(n_groups))) *
           static_cast<size_t>(group_size / 16) * 8 * static_cast<size_t>(n_rows) * sizeof(uint2);
}

template <int Bits, int G, int R, Mode M>
void launch_one(unsigned blocks, unsigned experts, const Params& p, size_t smem,
                cudaStream_t stream) {
    auto* kernel = mma_gemv_kernel<Bits, G, R, M>;
    if (smem + sizeof(float) * kWarps * kTiles * 2 * 32 > (size_t{48} << 10)) {  // + partial[]
        CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    }
    launch_dependent(kernel, dim3(blocks, experts), dim3(kThreads), smem, stream, p);
}

template <Mode M>
void launch(int bits, int group_size, int n_rows, unsigned blocks, unsigned experts,
            const Params& p, size_t smem, cudaStream_t stream) {
    // Runtime (bits, group, rows) → template arguments, once per call.
    auto with = [&](auto bits_c, auto group_c) {
        constexpr int kB = decltype(bits_c)::value;
        constexpr int kG = decltype(group_c)::value;
        switch (n_rows) {
            case 1: launch_one<kB, kG, 1, M>(blocks, experts, p, smem, stream); break;
            case 2: launch_one<kB, kG, 2, M>(blocks, experts, p, smem, stream); break;
            case 3: launch_one<kB, kG, 3, M>(blocks, experts, p, smem, stream); break;
            case 4: launch_one<kB, kG, 4, M>(blocks, experts, p, smem, stream); break;
            default: throw_internal("[mma_gemv] unchecked row count");
        }
    };
    with_code_shape(bits, group_size, "mma_gemv", with);
    CHERENKOV_CUDA_CHECK(cudaGetLastError());
}

// Tile sets of a matrix with `rows` rows and the blocks covering them.
unsigned blocks_for(int rows, int set_rows, int k_split) {
    const int sets = (rows + set_rows - 1) / set_rows;
    const int sets_per_block = kWarps / k_split;
    return static_cast<unsigned>((sets + sets_per_block - 1) / sets_per_block);
}

Params base_params(int rows, int64_t cols, int group_size) {
    Params p{};
    p.rows = rows;
    p.n_groups = static_cast<int>(cols / group_size);
    p.k_split = mma_k_split(p.n_groups);
    p.groups_per_part = groups_per_part(p.n_groups, p.k_split);
    return p;
}

}  // namespace

// Enough warps to keep loads in flight on short matrices, whole column ranges of ≥ 5 groups each.
int mma_k_split(int n_groups) {
    return n_groups >= 20 ? 4 : n_groups >= 10 ? 2 : 1;
}

bool mma_gemv_takes(int bits, int group_size, int64_t cols, int n_rows) {
    if (!kernel_policy().gemv_mma || n_rows < 1 || n_rows > kMaxGemvRows) return false;
    if (!mma_code_shape(bits, group_size)) return false;
    if (cols % group_size != 0 || cols > (int64_t{1} << 30)) return false;
    if (shared_bytes(group_size, static_cast<int>(cols / group_size), n_rows) > kMaxSharedBytes) {
        return false;
    }
    return kernel_policy().compute_major >= 8;  // bf16 mma.sync
}

void mma_gemv_dense(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows,
                    float* y, size_t y_stride, void* stream) {
    Params p = base_params(static_cast<int>(w.rows), w.cols, w.group_size);
    p.codes = w.codes;
    p.scales = w.scales;
    p.biases = w.biases;
    p.x = x;
    p.x_stride = x_stride;
    p.y = y;
    p.y_stride = y_stride;
    launch<Mode::Dense>(
        w.bits, w.group_size, n_rows, blocks_for(p.rows, kTiles * kTileRows, p.k_split), 1, p,
        shared_bytes(w.group_size, p.n_groups, n_rows), static_cast<cudaStream_t>(stream));
}

void mma_experts_gate_up(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                         const float* x, int n_rows, float* h, void* stream, const int* n_in_use) {
    Params p = base_params(static_cast<int>(shape.intermediate), shape.hidden, shape.group_size);
    p.table = table;
    p.n_in_use = n_in_use;
    p.x = x;
    p.x_stride = static_cast<size_t>(shape.hidden);
    p.y = h;
    p.y_stride = static_cast<size_t>(shape.intermediate);
    p.y_expert_stride = static_cast<size_t>(n_rows) * p.y_stride;
    launch<Mode::GateUp>(shape.bits, shape.group_size, n_rows,
                         blocks_for(p.rows, kTileRows, p.k_split), static_cast<unsigned>(n_experts),
                         p, shared_bytes(shape.group_size, p.n_groups, n_rows),
                         static_cast<cudaStream_t>(stream));
}

void mma_experts_down(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                      const float* h, int n_rows, float* parts, void* stream, const int* n_in_use) {
    Params p = base_params(static_cast<int>(shape.hidden), shape.intermediate, shape.group_size);
    p.table = table;
    p.n_in_use = n_in_use;
    p.x = h;
    p.x_stride = static_cast<size_t>(shape.intermediate);
    p.x_expert_stride = static_cast<size_t>(n_rows) * p.x_stride;
    p.y = parts;
    p.y_stride = static_cast<size_t>(shape.hidden);
    p.y_expert_stride = static_cast<size_t>(n_rows) * p.y_stride;
    launch<Mode::Down>(
        shape.bits, shape.group_size, n_rows, blocks_for(p.rows, kTiles * kTileRows, p.k_split),
        static_cast<unsigned>(n_experts), p, shared_bytes(shape.group_size, p.n_groups, n_rows),
        static_cast<cudaStream_t>(stream));
}

}  // namespace cherenkov::engine::cuda
