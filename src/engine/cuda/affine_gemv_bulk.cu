// Bulk-loaded tensor-core decode GEMV (affine_gemv_bulk.h). Why: the register-pipelined kernels
// of affine_gemv_mma.cu keep two groups per lane in flight, so a warp's ten groups take five
// memory round trips and the expert launches reach a quarter of the HBM bandwidth
// (docs/gemv-tensor-core.md). Here the bytes in flight are set by shared memory, not registers:
// every thread of a block issues its share of the block's rows (whole K) as 16-byte cp.async
// copies at the start, a dozen per thread, and nothing waits until they are all asked for.
// (cp.async.bulk was tried first: one bulk copy per row piece, ~500 per block, ran at half the
// speed of the register pipeline; the copy engine's cost per request dominates small pieces.)
//
// Block: 8 warps = sets_per_block tile sets × k_split warps. For the experts the k_split rule,
// the column ranges and the order of every sum are those of affine_gemv_mma.cu, so results are
// bitwise equal; dense matrices take the k_split (1-8) that gives every multiprocessor a block.
// A tile set is 16 rows of gate and the same 16 rows of up (GateUp) or 32 rows of one matrix.
// Shared memory, per block:
//   codes   [n_mats][mat_rows][code_stride]   rows padded so a warp's chunk loads hit distinct
//                                              banks (stride ≡ 4·chunk bytes mod 128)
//   params  [n_mats][scales, biases]          the rows' bf16 parameters, each region copied as
//                                              the 16-byte-aligned span around them
//   B       [steps][8R] uint2                 x as bf16 hi/lo fragments, built by the whole block
// Each warp's column range is cut in two halves: the first halves of every row (and the
// parameters) are one cp.async group, the second halves another, so warps multiply their first
// half while the second is still arriving. After the loop the codes region holds the k_split
// partial sums.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "engine/cuda/affine_gemv_bulk.h"
#include "engine/cuda/affine_gemv_mma.h"
#include "engine/cuda/affine_mma.cuh"
#include "engine/cuda/cp_async.cuh"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;
constexpr int kTiles = 2;   // 16-row tiles per warp
constexpr int kPhases = 2;  // copy groups: first and second half of every warp's column range
// Two blocks per SM: 228 KB of shared memory per SM, less 1 KB the system keeps per block.
constexpr size_t kMaxSharedBytes = size_t{113} << 10;
constexpr size_t kPartialBytes = sizeof(float) * kWarps * kTiles * 2 * 32;

enum class Mode { Dense, GateUp, Down };

struct Params {
    const uint8_t* codes;  // Dense: the matrix. GateUp/Down: taken from table[blockIdx.y].
    const uint16_t* scales;
    const uint16_t* biases;
    const ExpertAddress* table;
    const int* n_in_use;  // GateUp/Down: table entries to compute (device), or null: all
    int rows;             // output rows of one matrix
    int n_groups;         // groups of the block's column slice
    // Dense matrices too short to give every multiprocessor a block: the columns are cut into
    // k_slices slices, one per block of a cluster (grid.y), and the cluster adds the slices'
    // sums in rank order (add_slices). 1 otherwise.
    int k_slices;
    int src_row_bytes;     // code bytes of one whole matrix row (row_bytes: of the slice)
    int param_row_groups;  // groups of one whole row (the parameter arrays' row stride)
    int k_split;
    int groups_per_part;
    int mat_rows;     // rows of each matrix a block owns
    int row_bytes;    // code bytes of one matrix row
    int code_stride;  // bytes per row in shared memory
    int param_bytes;  // bytes of one parameter region in shared memory
    // Copy pieces: 16-byte chunks of one column range's first and second half, and reciprocals
    // of the piece and of a row's pieces (quotient()).
    int piece_chunks[2];
    int stripe_rows[2];  // rows a warp copies at once: max(1, 32 ÷ row piece)
    float inv_piece_chunks[2];
    float inv_row_piece_chunks[2];
    int params_offset;
    int b_offset;
    float x_silu_scale;  // Dense: not 0: the product takes silu(x_silu_scale · x) as its input
    const float* x;      // [R, x_stride] (+ e·x_expert_stride for Down)
    size_t x_stride;
    size_t x_expert_stride;
    float* y;  // [R, y_stride] (+ e·y_expert_stride for GateUp and Down)
    size_t y_stride;
    size_t y_expert_stride;
};

// Groups [first, end) of part `part`'s phase `phase` (the warp's range cut in two halves).
__device__ __forceinline__ int2 phase_groups(const Params& p, int part, int phase) {
    const int g0 = part * p.groups_per_part;
    const int g1 = max(g0, min(p.n_groups, g0 + p.groups_per_part));
    const int half = g0 + (p.groups_per_part + 1) / 2;
    return phase == 0 ? make_int2(g0, min(half, g1)) : make_int2(min(half, g1), g1);
}

// The whole block asks for its rows: the parameter spans and every row's first-phase pieces
// (committed as group 0), then the second-phase pieces (group 1). Each row has the same piece
// layout; consecutive lanes take consecutive chunks (coalesced).
// Returns, in param_skip, each parameter region's element offset of its first row.
template <int G, int Bits, Mode M>
__device__ __forceinline__ void issue_copies(const Params& p, uint8_t* smem, int row0, int valid,
                                             int (&param_skip)[2][2]) {
    constexpr int kMats = M == Mode::GateUp ? 2 : 1;
    constexpr int kChunksPerGroup = CodeLayout<Bits, G>::kGroupBytes / 16;
    const uint8_t* codes[kMats];
    const uint16_t* params[kMats][2];
    if constexpr (M == Mode::Dense) {
        const int slice = static_cast<int>(blockIdx.y);
        codes[0] = p.codes + static_cast<size_t>(slice) * p.row_bytes;
        params[0][0] = p.scales + static_cast<size_t>(slice) * p.n_groups;
        params[0][1] = p.biases + static_cast<size_t>(slice) * p.n_groups;
    } else {
        const ExpertAddress& a = p.table[blockIdx.y];
        if constexpr (M == Mode::GateUp) {
            codes[0] = a.gate_codes;
            params[0][0] = a.gate_scales;
            params[0][1] = a.gate_biases;
            codes[1] = a.up_codes;
            params[1][0] = a.up_scales;
            params[1][1] = a.up_biases;
        } else {
            codes[0] = a.down_codes;
            params[0][0] = a.down_scales;
            params[0][1] = a.down_biases;
        }
    }
    const uint64_t policy = evict_first_policy();
    // Parameter spans (copy_span widens them to 16-byte boundaries): the rows' whole parameter
    // rows, but the last row's only up to the slice's end (a later slice's span must not run
    // past the array).
    const size_t param_span =
        static_cast<size_t>(valid - 1) * p.param_row_groups + static_cast<size_t>(p.n_groups);
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            uint8_t* dst = smem + p.params_offset + (2 * m + k) * p.param_bytes;
            const int skip =
                copy_span(dst, params[m][k] + static_cast<size_t>(row0) * p.param_row_groups,
                          param_span, static_cast<int>(threadIdx.x), kThreads, policy);
            if (threadIdx.x == 0) param_skip[m][k] = skip;
        }
    }
    // Phase `phase` of a row is, for each of the k_split column ranges, piece_chunks[phase]
    // consecutive 16-byte chunks (row_piece in all). A warp copies stripe_rows[phase] rows at a
    // time, its lanes over their chunks; chunk f of a stripe is row f ÷ row_piece of it, range
    // (f mod row_piece) ÷ piece, chunk (f mod piece) of that range's piece. Where a lane's
    // chunks sit is worked out once and holds for every stripe, so a copy costs a few adds
    // (worked out per copy, the divisions were a fifth of the gate/up launch's instructions).
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
#pragma unroll
    for (int phase = 0; phase < kPhases; ++phase) {
        const int piece = p.piece_chunks[phase];
        const int row_piece = piece * p.k_split;
        const int stripe = p.stripe_rows[phase];
        const float inv_piece = p.inv_piece_chunks[phase];
        const float inv_row_piece = p.inv_row_piece_chunks[phase];
        const int first_group = phase == 0 ? 0 : (p.groups_per_part + 1) / 2;
        for (int f = lane; f < stripe * row_piece; f += 32) {
            const int in_stripe = quotient(f, inv_row_piece);
            const int in_row = f - in_stripe * row_piece;
            const int range = quotient(in_row, inv_piece);
            const int chunk = in_row - range * piece;
            const int byte =
                (range * p.groups_per_part + first_group) * (16 * kChunksPerGroup) + 16 * chunk;
#pragma unroll
            for (int m = 0; m < kMats; ++m) {
                const uint8_t* src = codes[m] + static_cast<size_t>(row0) * p.src_row_bytes + byte;
                uint8_t* dst = smem + m * p.mat_rows * p.code_stride + byte;
                for (int row = warp * stripe + in_stripe; row < valid; row += kWarps * stripe) {
                    copy_16(dst + row * p.code_stride,
                            src + static_cast<size_t>(row) * p.src_row_bytes, policy);
                }
            }
        }
        commit_copies();
    }
}

// silu(scale · v): the hyper-connection's activation between its down and up projections, taken
// on the up projection's input as it is read (device_math.cuh's silu_f, so the same bits as a
// separate kernel writing it first).
struct ScaledSiluInput {
    float scale;
    __device__ __forceinline__ float operator()(float v) const { return silu_f(v * scale); }
};

// Dense, k_slices > 1: rank 0 of the cluster adds the other blocks' sums of the same rows to its
// own, in rank order, through their shared memory (`partial`, as add_parts lays it out). Call
// from every thread of every block of the cluster. Returns whether this warp holds the sums.
template <int Tiles>
__device__ __forceinline__ bool add_slices(float (&total)[Tiles][2], float* partial, bool owner,
                                           int warp, int lane) {
#if __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    if (owner) {  // a warp's own slot is read by no other warp of the block (add_parts)
#pragma unroll
        for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                partial[partial_slot<Tiles>(warp, tile, h, lane)] = total[tile][h];
        }
    }
    cluster.sync();
    const bool first = cluster.block_rank() == 0;
    if (owner && first) {
        for (unsigned rank = 1; rank < cluster.num_blocks(); ++rank) {
            const float* other = cluster.map_shared_rank(partial, rank);
#pragma unroll
            for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    total[tile][h] += other[partial_slot<Tiles>(warp, tile, h, lane)];
            }
        }
    }
    cluster.sync();  // the other blocks' shared memory stays until rank 0 has read it
    return owner && first;
#else
    (void)total, (void)partial, (void)warp, (void)lane;
    return owner;  // plan_for gives k_slices > 1 only on sm_90
#endif
}

// grid: (blocks over the rows, n_experts, or k_slices for Dense); block: kThreads; dynamic shared
// memory as the file comment lays out (Params offsets).
template <int Bits, int G, int R, Mode M>
__global__ void __launch_bounds__(kThreads, 2) bulk_gemv_kernel(const Params p) {
    // Builds for sm_80+ (cp.async, bf16 mma; the launch-overlap calls compile to nothing below
    // sm_90); bulk_gemv_takes() keeps it to Hopper, where it was measured.
    using S = CodeLayout<Bits, G>;
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ int param_skip[2][2];

    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2;
    const int c = lane & 3;
    const int row0 = static_cast<int>(blockIdx.x) * p.mat_rows;
    const int valid = min(p.mat_rows, p.rows - row0);

    // The gate/up table may have been written by the previous kernel: wait before reading it.
    // Down reads the table gate/up already read (its writer finished before gate/up let this
    // launch start), and dense weights never change: their copies start before the wait.
    if constexpr (M == Mode::GateUp) wait_for_previous_kernel();
    // Entries past the count may hold anything (down reads the count as it reads the table).
    // Every block waits before it ends, so that this grid's end implies the previous one's.
    if constexpr (M != Mode::Dense) {
        if (p.n_in_use != nullptr && static_cast<int>(blockIdx.y) >= *p.n_in_use) {
            if constexpr (M == Mode::Down) wait_for_previous_kernel();
            return;
        }
    }
    issue_copies<G, Bits, M>(p, smem, row0, valid, param_skip);
    if constexpr (M != Mode::GateUp) wait_for_previous_kernel();
    allow_next_kernel();

    const float* x = p.x;
    float* y = p.y;
    if constexpr (M == Mode::Dense) x += static_cast<size_t>(blockIdx.y) * p.n_groups * G;
    if constexpr (M == Mode::Down) x += blockIdx.y * p.x_expert_stride;
    if constexpr (M != Mode::Dense) y += blockIdx.y * p.y_expert_stride;
    auto* b_frag = reinterpret_cast<uint2*>(smem + p.b_offset);
    if (M == Mode::Dense && p.x_silu_scale != 0.0F) {
        build_b<Bits, G, R>(b_frag, x, p.x_stride, 0, p.n_groups, static_cast<int>(threadIdx.x),
                            kThreads, ScaledSiluInput{p.x_silu_scale});
    } else {
        build_b<Bits, G, R>(b_frag, x, p.x_stride, 0, p.n_groups, static_cast<int>(threadIdx.x),
                            kThreads);
    }
    __syncthreads();  // B and param_skip

    const int part = warp % p.k_split;
    const int set = warp / p.k_split;
    constexpr int kSetRows = M == Mode::GateUp ? kTileRows : kTiles * kTileRows;
    const bool active = set * kSetRows < valid;  // warp-uniform
    const uint8_t* code_row[kTiles][2];
    const uint16_t* scale_row[kTiles][2];
    const uint16_t* bias_row[kTiles][2];
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
        const int m = M == Mode::GateUp ? tile : 0;
        const int tile_row0 =
            M == Mode::GateUp ? set * kTileRows : set * kSetRows + tile * kTileRows;
        const auto* scales =
            reinterpret_cast<const uint16_t*>(smem + p.params_offset + (2 * m) * p.param_bytes);
        const auto* biases =
            reinterpret_cast<const uint16_t*>(smem + p.params_offset + (2 * m + 1) * p.param_bytes);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // Rows past `valid` hold stale bytes; their sums are never stored.
            const int row = tile_row0 + g + 8 * h;
            code_row[tile][h] =
                smem + (m * p.mat_rows + row) * p.code_stride + c * S::kChunkWords * 4;
            scale_row[tile][h] = scales + param_skip[m][0] + row * p.param_row_groups;
            bias_row[tile][h] = biases + param_skip[m][1] + row * p.param_row_groups;
        }
    }

    float total[kTiles][2] = {};
#pragma unroll
    for (int phase = 0; phase < kPhases; ++phase) {
        if (phase == 0) {
            wait_copies<1>();
        } else {
            wait_copies<0>();
        }
        __syncthreads();  // every thread's copies of this phase have landed
        if (!active) continue;
        const int2 range = phase_groups(p, part, phase);
#pragma unroll 2
        for (int group = range.x; group < range.y; ++group) {
            uint32_t words[kTiles][2][S::kChunkWords];
            float scale[kTiles][2], bias[kTiles][2];
#pragma unroll
            for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    load_shared_words(code_row[tile][h] + group * S::kGroupBytes, words[tile][h]);
                    scale[tile][h] = bf16_bits_to_float(scale_row[tile][h][group]);
                    bias[tile][h] = bf16_bits_to_float(bias_row[tile][h][group]);
                }
            }
            multiply_group<Bits, G, R, kTiles>(words, b_frag + group * S::kStepsPerGroup * 8 * R,
                                               lane, scale, bias, total);
        }
    }

    __syncthreads();  // every warp is done with the codes region, which now takes the partials
    auto* partial = reinterpret_cast<float*>(smem);
    bool owner = add_parts(total, partial, warp, part, p.k_split, lane) && active;
    if constexpr (M == Mode::Dense) {
        if (p.k_slices > 1) owner = add_slices(total, partial, owner, warp, lane);
    }
    if (!owner) return;
    store_tile_set<R, M == Mode::GateUp>(total, y, p.y_stride, row0 + set * kSetRows, p.rows, lane);
}

// A block's shared-memory plan for one matrix shape; total 0 when the shape is not taken.
struct Plan {
    Params p{};
    size_t total = 0;
};

// One block per SM: the most one block may have (227 KB on the H100/H200), less room for the
// kernel's static shared memory.
size_t max_shared_alone() {
    const size_t optin = kernel_policy().max_shared_per_block;
    return optin > kMaxSharedBytes + 256 ? optin - 256 : kMaxSharedBytes;
}

int multiprocessors() {
    return kernel_policy().multiprocessors;
}

// The block layout of a matrix shape at a given k_split; total 0 when it does not fit
// `max_shared` bytes of shared memory or k_split does not divide the groups evenly.
Plan layout(Mode mode, int bits, int group_size, int64_t rows, int64_t cols, int n_rows,
            int k_split, size_t max_shared, int k_slices = 1) {
    Plan plan;
    Params& p = plan.p;
    p.rows = static_cast<int>(rows);
    p.param_row_groups = static_cast<int>(cols / group_size);
    p.k_slices = k_slices;
    if (p.param_row_groups % k_slices != 0) return plan;
    p.n_groups = p.param_row_groups / k_slices;
    p.k_split = k_split;
    // Every column range the same length, so every row's copy pieces have the same layout.
    if (p.n_groups % k_split != 0) return plan;
    p.groups_per_part = p.n_groups / k_split;
    const int sets_per_block = kWarps / k_split;
    const int n_mats = mode == Mode::GateUp ? 2 : 1;
    p.mat_rows = sets_per_block * (mode == Mode::GateUp ? kTileRows : kTiles * kTileRows);
    const int group_bytes = group_size * bits / 8;
    p.row_bytes = p.n_groups * group_bytes;
    p.src_row_bytes = p.param_row_groups * group_bytes;
    // quotient() is exact below 2^22 chunks per matrix and block.
    if (static_cast<int64_t>(p.mat_rows) * (p.row_bytes / 16) >= (int64_t{1} << 22)) return plan;
    const int chunk_bytes = group_bytes / 4;
    const int first_half = (p.groups_per_part + 1) / 2;
    for (int phase = 0; phase < kPhases; ++phase) {
        const int groups = phase == 0 ? first_half : p.groups_per_part - first_half;
        p.piece_chunks[phase] = groups * group_bytes / 16;
        p.stripe_rows[phase] = std::max(1, 32 / std::max(1, p.piece_chunks[phase] * k_split));
        p.inv_piece_chunks[phase] =
            groups > 0 ? 1.0F / static_cast<float>(p.piece_chunks[phase]) : 0.0F;
        p.inv_row_piece_chunks[phase] =
            groups > 0 ? 1.0F / static_cast<float>(p.piece_chunks[phase] * k_split) : 0.0F;
    }
    p.code_stride = (p.row_bytes + 127) / 128 * 128 + (4 * chunk_bytes) % 128;
    p.param_bytes = (p.mat_rows * p.param_row_groups * 2 + 15) / 16 * 16 + 32;
    const size_t codes = static_cast<size_t>(n_mats) * p.mat_rows * p.code_stride;
    p.params_offset = static_cast<int>(std::max(codes, kPartialBytes));
    p.b_offset = p.params_offset + 2 * n_mats * p.param_bytes;
    const size_t b_bytes =
        static_cast<size_t>(p.n_groups) * (group_size / 16) * 8 * n_rows * sizeof(uint2);
    const size_t total = static_cast<size_t>(p.b_offset) + b_bytes;
    if (total > max_shared) return plan;
    plan.total = total;
    return plan;
}

int blocks_of(const Plan& plan) {
    return (plan.p.rows + plan.p.mat_rows - 1) / plan.p.mat_rows;
}

Plan plan_for(Mode mode, int bits, int group_size, int64_t rows, int64_t cols, int n_rows) {
    const KernelPolicy& policy = kernel_policy();
    if (!policy.gemv_bulk || n_rows < 1 || n_rows > kMaxGemvRows || policy.compute_major < 9) {
        return Plan{};
    }
    if (!mma_code_shape(bits, group_size) || cols % group_size != 0 || cols > (int64_t{1} << 20) ||
        rows < 1 || rows > (int64_t{1} << 30)) {
        return Plan{};
    }
    const int n_groups = static_cast<int>(cols / group_size);
    if (mode != Mode::Dense) {
        // The experts keep affine_gemv_mma.cu's column ranges: the same bits as its kernels.
        return layout(mode, bits, group_size, rows, cols, n_rows, mma_k_split(n_groups),
                      kMaxSharedBytes);
    }
    // Dense: the fewest warps per row set that still give every multiprocessor a block (more
    // warps per set = shorter column ranges, more blocks); a grid of at most one block per
    // multiprocessor may take a whole multiprocessor's shared memory.
    Plan best;
    for (const int k_split : {1, 2, 4, 8}) {
        if (n_groups / k_split < 2) break;  // each column range at least a group per phase
        Plan plan = layout(mode, bits, group_size, rows, cols, n_rows, k_split, kMaxSharedBytes);
        if (plan.total == 0) {
            plan = layout(mode, bits, group_size, rows, cols, n_rows, k_split, max_shared_alone());
            if (plan.total != 0 && blocks_of(plan) > multiprocessors()) plan.total = 0;
        }
        if (plan.total == 0) continue;
        best = plan;
        if (blocks_of(plan) >= multiprocessors()) break;
    }
    if (best.total != 0 && blocks_of(best) >= multiprocessors()) return best;
    if (!policy.gemv_slices) return best;
    // Too few row sets to fill the GPU ([320, 10240] took 10 blocks and 14 µs): cut the columns
    // over the blocks of a cluster too. The fewest slices that fill it, else the most blocks.
    for (const int k_slices : {2, 4, 8}) {
        for (const int k_split : {1, 2, 4, 8}) {
            if (n_groups / k_slices / k_split < 2) break;
            const Plan plan = layout(mode, bits, group_size, rows, cols, n_rows, k_split,
                                     kMaxSharedBytes, k_slices);
            if (plan.total == 0) continue;
            const int blocks = blocks_of(plan) * k_slices;
            if (best.total == 0 || blocks > blocks_of(best) * best.p.k_slices) best = plan;
            if (blocks >= multiprocessors()) return best;
        }
    }
    return best;
}

template <int Bits, int G, int R, Mode M>
void launch_one(unsigned blocks, unsigned experts, const Params& p, size_t smem,
                cudaStream_t stream) {
    auto* kernel = bulk_gemv_kernel<Bits, G, R, M>;
    // The largest plan any shape gets, set at every launch rather than remembered per process: an
    // attribute of the kernel in the current device's context (a host call that queues no work,
    // so it may run under stream capture; graph replays skip it).
    CHERENKOV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(max_shared_alone())));
    const auto slices = static_cast<unsigned>(p.k_slices);  // 1 but for short dense matrices
    launch_dependent_in_clusters(kernel, dim3(blocks, experts * slices), dim3(kThreads),
                                 dim3(1, slices, 1), smem, stream, p);
}

template <Mode M>
void launch(int bits, int group_size, int n_rows, unsigned experts, const Plan& plan,
            cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>(blocks_of(plan));
    // Runtime (bits, group, rows) → template arguments, once per call.
    auto with = [&](auto bits_c, auto group_c) {
        constexpr int kB = decltype(bits_c)::value;
        constexpr int kG = decltype(group_c)::value;
        switch (n_rows) {
            case 1: launch_one<kB, kG, 1, M>(blocks, experts, plan.p, plan.total, stream); break;
            case 2: launch_one<kB, kG, 2, M>(blocks, experts, plan.p, plan.total, stream); break;
            case 3: launch_one<kB, kG, 3, M>(blocks, experts, plan.p, plan.total, stream); break;
            case 4: launch_one<kB, kG, 4, M>(blocks, experts, plan.p, plan.total, stream); break;
            default: throw_internal("[bulk_gemv] unchecked row count");
        }
    };
    with_code_shape(bits, group_size, "bulk_gemv", with);
}

Plan checked_plan(Mode mode, int bits, int group_size, int64_t rows, int64_t cols, int n_rows,
                  const char* what) {
    Plan plan = plan_for(mode, bits, group_size, rows, cols, n_rows);
    if (plan.total == 0) throw_internal(std::string("[") + what + "] shape not taken");
    return plan;
}

}  // namespace

bool bulk_gemv_takes(int bits, int group_size, int64_t rows, int64_t cols, int n_rows) {
    return plan_for(Mode::Dense, bits, group_size, rows, cols, n_rows).total != 0;
}

int bulk_gemv_column_slices(int bits, int group_size, int64_t rows, int64_t cols, int n_rows) {
    const Plan plan = plan_for(Mode::Dense, bits, group_size, rows, cols, n_rows);
    return plan.total != 0 ? plan.p.k_slices : 0;
}

bool bulk_experts_take(const ExpertShape& shape, int n_rows) {
    return plan_for(Mode::GateUp, shape.bits, shape.group_size, shape.intermediate, shape.hidden,
                    n_rows)
                   .total != 0 &&
           plan_for(Mode::Down, shape.bits, shape.group_size, shape.hidden, shape.intermediate,
                    n_rows)
                   .total != 0;
}

void bulk_gemv_dense(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int n_rows,
                     float* y, size_t y_stride, void* stream, float x_silu_scale) {
    Plan plan =
        checked_plan(Mode::Dense, w.bits, w.group_size, w.rows, w.cols, n_rows, "bulk_gemv_dense");
    plan.p.codes = w.codes;
    plan.p.scales = w.scales;
    plan.p.biases = w.biases;
    plan.p.x_silu_scale = x_silu_scale;
    plan.p.x = x;
    plan.p.x_stride = x_stride;
    plan.p.y = y;
    plan.p.y_stride = y_stride;
    launch<Mode::Dense>(w.bits, w.group_size, n_rows, 1, plan, static_cast<cudaStream_t>(stream));
}

void bulk_experts_gate_up(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                          const float* x, int n_rows, float* h, void* stream, const int* n_in_use) {
    Plan plan = checked_plan(Mode::GateUp, shape.bits, shape.group_size, shape.intermediate,
                             shape.hidden, n_rows, "bulk_experts_gate_up");
    plan.p.table = table;
    plan.p.n_in_use = n_in_use;
    plan.p.x = x;
    plan.p.x_stride = static_cast<size_t>(shape.hidden);
    plan.p.y = h;
    plan.p.y_stride = static_cast<size_t>(shape.intermediate);
    plan.p.y_expert_stride = static_cast<size_t>(n_rows) * plan.p.y_stride;
    launch<Mode::GateUp>(shape.bits, shape.group_size, n_rows, static_cast<unsigned>(n_experts),
                         plan, static_cast<cudaStream_t>(stream));
}

void bulk_experts_down(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                       const float* h, int n_rows, float* parts, void* stream,
                       const int* n_in_use) {
    Plan plan = checked_plan(Mode::Down, shape.bits, shape.group_size, shape.hidden,
                             shape.intermediate, n_rows, "bulk_experts_down");
    plan.p.table = table;
    plan.p.n_in_use = n_in_use;
    plan.p.x = h;
    plan.p.x_stride = static_cast<size_t>(shape.intermediate);
    plan.p.x_expert_stride = static_cast<size_t>(n_rows) * plan.p.x_stride;
    plan.p.y = parts;
    plan.p.y_stride = static_cast<size_t>(shape.hidden);
    plan.p.y_expert_stride = static_cast<size_t>(n_rows) * plan.p.y_stride;
    launch<Mode::Down>(shape.bits, shape.group_size, n_rows, static_cast<unsigned>(n_experts), plan,
                       static_cast<cudaStream_t>(stream));
}

}  // namespace cherenkov::engine::cuda
