// group_by_expert (expert_grouping.h): one block of 1024 threads, its per-expert counts in shared
// memory. The call's T·k entries are counted with shared-memory atomics, one warp scans the
// counts into each expert's first index and first tile, and the threads then write the tiles,
// place every entry at its expert's next free index (a shared-memory atomic), and rank each row's
// entries by expert for the combine. One block is enough: a 4096-row chunk has 40,960 entries,
// a few passes of 1024 threads, against the host round trip per layer it replaces.
#include "engine/cuda/expert_grouping.h"

#include <cuda_runtime.h>

#include <string>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ int tiles_of(int count) {
    return (count + kExpertTokenTile - 1) / kExpertTokenTile;
}

// Exclusive scan by warp 0 of count[e] into first[e] and of tiles_of(count[e]) into
// first_tile[e]; lane l takes a contiguous run of experts. Returns, in every lane, the total
// tiles (.x) and the experts with any entry (.y).
__device__ int2 scan_experts(const int* count, int* first, int* first_tile, int n_experts) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int run = (n_experts + 31) / 32;
    const int begin = min(lane * run, n_experts);
    const int end = min(begin + run, n_experts);
    int entries = 0, tiles = 0, used = 0;
    for (int e = begin; e < end; ++e) {
        entries += count[e];
        tiles += tiles_of(count[e]);
        used += count[e] > 0 ? 1 : 0;
    }
    int entries_before = entries, tiles_before = tiles;  // inclusive, then made exclusive
    for (int offset = 1; offset < 32; offset <<= 1) {
        const int e_up = __shfl_up_sync(0xFFFFFFFFU, entries_before, offset);
        const int t_up = __shfl_up_sync(0xFFFFFFFFU, tiles_before, offset);
        if (lane >= offset) {
            entries_before += e_up;
            tiles_before += t_up;
        }
    }
    const int total_tiles = __shfl_sync(0xFFFFFFFFU, tiles_before, 31);
    entries_before -= entries;
    tiles_before -= tiles;
    for (int e = begin; e < end; ++e) {
        first[e] = entries_before;
        first_tile[e] = tiles_before;
        entries_before += count[e];
        tiles_before += tiles_of(count[e]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) used += __shfl_xor_sync(0xFFFFFFFFU, used, offset);
    return make_int2(total_tiles, used);
}

// Dynamic shared memory: 4·E ints.
__global__ void __launch_bounds__(kThreads)
    group_by_expert_kernel(const int32_t* experts, const float* weights, int n_rows, int top,
                           int n_experts, DeviceExpertGroups out) {
    extern __shared__ int shared[];
    int* count = shared;
    int* first = count + n_experts;
    int* first_tile = first + n_experts;
    int* fill = first_tile + n_experts;
    const auto thread = static_cast<int>(threadIdx.x);
    const int tk = n_rows * top;
    for (int e = thread; e < n_experts; e += kThreads) {
        count[e] = 0;
        fill[e] = 0;
    }
    wait_for_previous_kernel();
    allow_next_kernel();
    __syncthreads();
    for (int i = thread; i < tk; i += kThreads) atomicAdd(&count[experts[i]], 1);
    __syncthreads();
    if (thread < 32) {
        const int2 totals = scan_experts(count, first, first_tile, n_experts);
        if (thread == 0) {
            *out.n_tiles = totals.x;
            if (out.hits != nullptr)
                atomicAdd(out.hits, static_cast<unsigned long long>(totals.y));
        }
    }
    __syncthreads();
    for (int e = thread; e < n_experts; e += kThreads) {
        const int c = count[e];
        for (int j = 0; j < tiles_of(c); ++j) {
            const int done = j * kExpertTokenTile;
            out.tiles[first_tile[e] + j] =
                ExpertTokenTile{e, first[e] + done, min(kExpertTokenTile, c - done)};
        }
    }
    for (int i = thread; i < tk; i += kThreads) {
        const int32_t e = experts[i];
        out.slots[first[e] + atomicAdd(&fill[e], 1)] = i;
        const int t = i / top;
        int rank = 0;  // experts of the row below e
        for (int j = t * top; j < (t + 1) * top; ++j) rank += experts[j] < e ? 1 : 0;
        out.part_rows[t * top + rank] = i;
        out.part_weights[t * top + rank] = weights[i];
    }
}

}  // namespace

void group_by_expert(const int32_t* experts, const float* weights, int64_t n_rows, int top,
                     int n_experts, const DeviceExpertGroups& out, void* stream) {
    if (n_rows <= 0) return;
    if (top < 1 || n_experts < top || n_experts > kMaxGroupedExperts ||
        n_rows * top > (int64_t{1} << 30)) {
        throw_invalid("[group_by_expert] " + std::to_string(n_rows) + " rows of top " +
                      std::to_string(top) + " over " + std::to_string(n_experts) +
                      " experts: top must be 1 to E, E at most " +
                      std::to_string(kMaxGroupedExperts) + ", T·k at most 2^30");
    }
    if (experts == nullptr || weights == nullptr || out.slots == nullptr || out.tiles == nullptr ||
        out.n_tiles == nullptr || out.part_rows == nullptr || out.part_weights == nullptr) {
        throw_invalid("[group_by_expert] null device pointer");
    }
    const size_t shared_bytes = 4 * static_cast<size_t>(n_experts) * sizeof(int);
    launch_dependent(group_by_expert_kernel, dim3(1), dim3(kThreads), shared_bytes,
                     static_cast<cudaStream_t>(stream), experts, weights,
                     static_cast<int>(n_rows), top, n_experts, out);
}

}  // namespace cherenkov::engine::cuda
