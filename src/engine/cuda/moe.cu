// The MoE block on the GPU (docs/qwen4_exp.md §3.7): softmax router and top-k on the device, one
// read-back of the routing (and the next layer's predicted routing) per layer, routed experts
// from the host ExpertSource copied into the DeviceExpertPool and computed as they arrive into
// per-(row, slot) outputs, then one combine kernel that sums them in increasing expert index and
// adds the gated shared expert. The union, the fetch in groups, the lookahead and the combine
// order are engine/model/moe_policy.h's, which the CPU's MoE uses too. Decode
// (≤ 4 rows) groups experts into affine_experts_swiglu_parts launches; prefill groups them into
// the token-tiled expert_gemm launches, computing experts one at a time only for shapes those
// kernels do not take. A call on a layer the pool holds whole skips the read-back
// (moe_forward_on_device): a decode call's routing becomes an address table on the device, a
// prefill call's is grouped by expert into the GEMMs' token tiles there (expert_grouping.h).
// Kernels wait for the previous kernel before touching memory and are launched with
// launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/cpu_experts.h"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/expert_gemm.h"
#include "engine/cuda/expert_group.h"
#include "engine/cuda/expert_grouping.h"
#include "engine/cuda/expert_layer.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/routing_trace.h"
#include "engine/model/moe_policy.h"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kElementwiseThreads = 256;
// Experts per decode launch (affine_experts_swiglu_parts): residents arrive back to back, so a
// group of them costs two launches; misses arrive one read at a time and wait for the group to
// fill or the batch to end, which is short against the read itself.
constexpr int kDecodeGroup = 16;

// (value, index) order of the router: larger probability first, an exact tie → smaller index.
__device__ __forceinline__ bool ranks_before(float v, int i, float best_v, int best_i) {
    return v > best_v || (v == best_v && i < best_i);
}

// Outputs of the routing on the device (build_device_routing); table null: none.
struct DeviceRouting {
    const ExpertAddress* addresses = nullptr;  // the layer's [E]
    const ExpertAddress* first = nullptr;      // the shared expert as entry 0, or null
    ExpertAddress* table = nullptr;
    int* n_table = nullptr;
    int32_t* part_rows = nullptr;
    float* part_weights = nullptr;
    unsigned long long* hits = nullptr;
};

// The routing of a layer the device pool holds whole (moe_forward_on_device), by one block:
//   table[0]     *first (the shared expert), when first is not null;
//   table[F, F+U) the addresses of the union of the rows' experts (F = 1 with a first entry,
//                else 0), in order of first appearance (any order gives the same bits: an
//                expert's parts depend only on its weights and rows, and the combine sums in
//                increasing expert index);
//   *n_table     F + U; U is added to *hits;
//   part_rows, part_weights [T, top]: each row's parts in increasing expert index, as
//                moe_finish lays them out for moe_combine_kernel (part row = table index · T + t).
// experts, weights: the router's [T, top], distinct experts per row; addresses: [E].
// union_index: shared memory of E ints, then room for T·top ints and T·top floats (a staged copy
// of experts and weights, read once by all threads: the serial union below read them from global
// memory, a round trip per entry).
__device__ void build_device_routing(const int32_t* experts, const float* weights, int n_rows,
                                     int top, int n_experts, const DeviceRouting& r,
                                     int* union_index) {
    const int tk = n_rows * top;
    int* row_experts = union_index + n_experts;
    auto* row_weights = reinterpret_cast<float*>(row_experts + tk);
    const auto thread = static_cast<int>(threadIdx.x);
    const auto threads = static_cast<int>(blockDim.x);
    for (int i = thread; i < tk; i += threads) {
        row_experts[i] = experts[i];
        row_weights[i] = weights[i];
    }
    for (int e = thread; e < n_experts; e += threads) union_index[e] = -1;
    if (r.first != nullptr && thread == threads - 1) r.table[0] = *r.first;
    __syncthreads();
    if (thread == 0) {  // at most 4 · top entries
        const int n_first = r.first != nullptr ? 1 : 0;
        int n = n_first;
        for (int i = 0; i < tk; ++i) {
            if (union_index[row_experts[i]] < 0) union_index[row_experts[i]] = n++;
        }
        *r.n_table = n;
        atomicAdd(r.hits, static_cast<unsigned long long>(n - n_first));
    }
    __syncthreads();
    for (int e = thread; e < n_experts; e += threads) {
        if (union_index[e] >= 0) r.table[union_index[e]] = r.addresses[e];
    }
    for (int i = thread; i < tk; i += threads) {
        const int t = i / top;
        const int32_t e = row_experts[i];
        int rank = 0;  // experts of the row below e
        for (int j = t * top; j < (t + 1) * top; ++j) rank += row_experts[j] < e ? 1 : 0;
        r.part_rows[t * top + rank] = union_index[e] * n_rows + t;
        r.part_weights[t * top + rank] = row_weights[i];
    }
}

// Experts per lane held in registers by the router top-k (E ≤ 32 · kRouterSlice); larger E
// keeps the probabilities in shared memory only.
constexpr int kRouterSlice = 16;

// The warp's argmax of (value, index) by ranks_before; every lane ends with the winner.
__device__ __forceinline__ int warp_best_expert(float best_v, int best_i) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float other_v = __shfl_xor_sync(0xFFFFFFFFU, best_v, offset);
        const int other_i = __shfl_xor_sync(0xFFFFFFFFU, best_i, offset);
        if (ranks_before(other_v, other_i, best_v, best_i)) {
            best_v = other_v;
            best_i = other_i;
        }
    }
    return best_i;
}

// A NaN ranks as −∞, so every rank names an expert (never INT_MAX) whatever the logits.
__device__ __forceinline__ float rank_value(float p) {
    return p == p ? p : -INFINITY;
}

// p = softmax(logits row) and chosen = its top n_sorted, with lane e mod 32 holding expert e's
// value in registers: every logit load is issued before any is used, and no rank reads shared
// memory (the shared-memory form below waited a memory round trip per expert a lane owns,
// ~11 µs at E = 512). p is still written to shared memory for the caller's epilogue. The sums
// are the shared-memory form's, in the same order, and the ranking is the same order, so the
// results are the same.
__device__ __forceinline__ void router_topk_in_registers(const float* l, int n_experts,
                                                         int n_sorted, float* p, int* chosen) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    float v[kRouterSlice];
#pragma unroll
    for (int j = 0; j < kRouterSlice; ++j) {
        const int e = lane + 32 * j;
        v[j] = e < n_experts ? l[e] : -INFINITY;
    }
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kRouterSlice; ++j) m = fmaxf(m, v[j]);
    m = warp_max(m);
    float s = 0.0F;
#pragma unroll
    for (int j = 0; j < kRouterSlice; ++j) {
        if (lane + 32 * j < n_experts) {
            v[j] = expf(v[j] - m);
            s += v[j];
        }
    }
    s = warp_sum(s);
    const float inv = 1.0F / s;
#pragma unroll
    for (int j = 0; j < kRouterSlice; ++j) {
        const int e = lane + 32 * j;
        if (e < n_experts) {
            v[j] *= inv;
            p[e] = v[j];
        }
    }
    // Ranked by 32-bit keys with the warp's max/min reductions (two instructions a rank instead
    // of five shuffle rounds of value and index): a probability is ≥ 0 or NaN, and as unsigned
    // the bits of a non-negative float order like its value; NaN, ranked as −∞ (rank_value),
    // takes 0, below +0's 1. Ties go to the lower expert, as ranks_before has them.
    uint32_t key[kRouterSlice];
    unsigned taken = 0;  // bit j: expert lane + 32·j is ranked (or does not exist)
#pragma unroll
    for (int j = 0; j < kRouterSlice; ++j) {
        key[j] = v[j] == v[j] ? __float_as_uint(v[j]) + 1U : 0U;
        if (lane + 32 * j >= n_experts) taken |= 1U << j;
    }
    for (int rank = 0; rank < n_sorted; ++rank) {
        uint32_t best_key = 0;
        unsigned best_e = UINT_MAX;
#pragma unroll
        for (int j = 0; j < kRouterSlice; ++j) {  // experts ascending: > keeps the lower on ties
            if ((taken >> j & 1U) == 0 && (key[j] > best_key || best_e == UINT_MAX)) {
                best_key = key[j];
                best_e = static_cast<unsigned>(lane + 32 * j);
            }
        }
        const uint32_t top_key = __reduce_max_sync(0xFFFFFFFFU, best_key);
        const auto best_i = static_cast<int>(
            __reduce_min_sync(0xFFFFFFFFU, best_key == top_key ? best_e : UINT_MAX));
        if (lane == (best_i & 31)) taken |= 1U << (best_i >> 5);
        if (lane == 0) chosen[rank] = best_i;
    }
    __syncwarp();
}

__device__ __forceinline__ void router_topk_in_shared(const float* l, int n_experts, int n_sorted,
                                                      float* p, int* chosen, unsigned char* taken) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    float m = -INFINITY;
    for (int e = lane; e < n_experts; e += 32) {
        p[e] = l[e];
        taken[e] = 0;
        m = fmaxf(m, p[e]);
    }
    m = warp_max(m);
    float s = 0.0F;
    for (int e = lane; e < n_experts; e += 32) {
        const float v = expf(p[e] - m);
        p[e] = v;
        s += v;
    }
    s = warp_sum(s);
    const float inv = 1.0F / s;
    for (int e = lane; e < n_experts; e += 32) p[e] *= inv;
    __syncwarp();
    for (int rank = 0; rank < n_sorted; ++rank) {
        float best_v = -INFINITY;
        int best_i = INT_MAX;
        for (int e = lane; e < n_experts; e += 32) {
            const float v = rank_value(p[e]);
            if (taken[e] == 0 && ranks_before(v, e, best_v, best_i)) {
                best_v = v;
                best_i = e;
            }
        }
        best_i = warp_best_expert(best_v, best_i);
        if (lane == (best_i & 31)) taken[best_i] = 1;
        if (lane == 0) chosen[rank] = best_i;
        __syncwarp();
    }
}

// The top-k of row `row` by one warp (router_topk_kernel's comment).
__device__ void warp_router_topk(const float* logits, int row, int n_experts, int top,
                                 bool normalize, float* p, int* chosen, unsigned char* taken,
                                 int32_t* experts, float* weights, float* margins) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const float* l = logits + static_cast<size_t>(row) * n_experts;
    const int n_sorted = min(top + 1, n_experts);
    if (n_experts <= 32 * kRouterSlice) {
        router_topk_in_registers(l, n_experts, n_sorted, p, chosen);
    } else {
        router_topk_in_shared(l, n_experts, n_sorted, p, chosen, taken);
    }

    if (lane != 0) return;
    if (margins != nullptr) {
        float margin = INFINITY;
        if (top < n_experts) {
            const float kth = p[chosen[top - 1]];
            margin = (kth - p[chosen[top]]) / kth;
        }
        margins[row] = margin;
    }
    float sum = 0.0F;
    for (int rank = 0; rank < top; ++rank) sum += p[chosen[rank]];
    for (int rank = 0; rank < top; ++rank) {
        const int e = chosen[rank];
        experts[row * top + rank] = e;
        weights[row * top + rank] = normalize ? p[e] / sum : p[e];
    }
}

// One warp per row (a block's warps take consecutive rows): p = softmax(logits[row]) (ops.cpp's
// softmax: max, exp, sum, multiply by 1/sum; the sums in the warp's order), then the top
// min(top + 1, E) by repeated warp argmax, with no block barrier (one block per row with a block
// argmax per rank took ~10 µs at E = 512), in registers up to E = 32 · kRouterSlice.
// Lane 0 writes the row's top experts, their weights (renormalized over the top when `normalize`,
// summed in rank order as the CPU does) and the margin (kth − (k+1)th) / kth (∞ when top == E).
// logits: [T, E]; experts, weights: [T, top]; margins: [T] or null. grid ceil(T / warps).
// With routing.table set (T ≤ the block's warps, one block), the block then turns the rows' top
// experts into the layer's address table (build_device_routing): one launch instead of two.
// Dynamic shared memory: warps · (E floats, (top + 1) ints, E bytes); with routing.table, at
// least E + 2·T·top words.
__global__ void router_topk_kernel(const float* logits, int n_rows, int n_experts, int top,
                                   bool normalize, int32_t* experts, float* weights, float* margins,
                                   DeviceRouting routing) {
    extern __shared__ float shared[];
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int rows_per_block = static_cast<int>(blockDim.x) >> 5;
    const int row = static_cast<int>(blockIdx.x) * rows_per_block + warp;
    const auto e_count = static_cast<size_t>(n_experts);
    float* all_p = shared;                                                       // [rows, E]
    int* all_chosen = reinterpret_cast<int*>(all_p + rows_per_block * e_count);  // [rows, top + 1]
    auto* all_taken = reinterpret_cast<unsigned char*>(all_chosen + rows_per_block * (top + 1));
    float* p = all_p + warp * e_count;
    int* chosen = all_chosen + warp * (top + 1);
    unsigned char* taken = all_taken + warp * e_count;  // [E]
    wait_for_previous_kernel();
    allow_next_kernel();
    if (row < n_rows) {
        warp_router_topk(logits, row, n_experts, top, normalize, p, chosen, taken, experts, weights,
                         margins);
    }
    if (routing.table == nullptr) return;  // the same for the whole block
    __syncthreads();  // the rows' experts and weights (global memory) are seen by every thread
    build_device_routing(experts, weights, n_rows, top, n_experts, routing,
                         reinterpret_cast<int*>(shared));
}

// g[i] = silu(g[i]) · u[i] for i < n.
__global__ void silu_mul_kernel(float* g, const float* u, int64_t n) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) g[i] = silu_f(g[i]) * u[i];
}

// xg[i, :] = mix[slots[i] / top, :] for i < n. grid: (ceil(H / threads), n).
__global__ void gather_rows_kernel(const float* mix, const int32_t* slots, int top, int hidden,
                                   float* xg) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int d = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (d >= hidden) return;
    const int i = static_cast<int>(blockIdx.y);
    const int row = slots[i] / top;
    xg[static_cast<size_t>(i) * hidden + d] = mix[static_cast<size_t>(row) * hidden + d];
}

// outputs[slots[i], :] = yg[i, :] for i < n. grid: (ceil(H / threads), n).
__global__ void scatter_rows_kernel(const float* yg, const int32_t* slots, int hidden,
                                    float* outputs) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int d = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (d >= hidden) return;
    const int i = static_cast<int>(blockIdx.y);
    outputs[static_cast<size_t>(slots[i]) * hidden + d] = yg[static_cast<size_t>(i) * hidden + d];
}

// routed[t, d] = Σ_m part_weights[t, m] · parts[part_rows[t, m], d] over m until a −1 (the row's
// delivered experts in increasing expert index); y = routed + sigmoid(shared_gate[t]) · shared.
// part_rows, part_weights: [T, top]; parts: [*, H]; shared, routed, y: [T, H]; shared_gate: [T].
// A batch of the row's parts is loaded before any is added: loaded one after another (each
// address read first) they were a chain of ~2·top dependent L2 round trips. With residual.x, also
// the hyper-connection update x[t, s·H + d] += inject[t, s] · y[t, d] (hyper_connection_combine's
// arithmetic, one launch less).
__global__ void moe_combine_kernel(const float* parts, const int32_t* part_rows,
                                   const float* part_weights, int top, const float* shared,
                                   const float* shared_gate, int n_rows, int hidden, float* routed,
                                   float* y, ResidualUpdate residual) {
    constexpr int kBatch = 16;
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (index >= static_cast<int64_t>(n_rows) * hidden) return;
    const int t = static_cast<int>(index / hidden);
    const int d = static_cast<int>(index - static_cast<int64_t>(t) * hidden);
    const float gate = sigmoid_f(shared_gate[t]);
    const float shared_part = shared[index];
    float sum = 0.0F;
    bool done = false;
    for (int m0 = 0; m0 < top && !done; m0 += kBatch) {
        int32_t r[kBatch];
        float w[kBatch], v[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            const int m = m0 + i;
            r[i] = m < top ? part_rows[t * top + m] : -1;
            w[i] = m < top ? part_weights[t * top + m] : 0.0F;
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {  // entries past the first −1 are not row numbers
            done = done || r[i] < 0;
            if (done) r[i] = -1;
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            v[i] = r[i] >= 0 ? parts[static_cast<size_t>(r[i]) * hidden + d] : 0.0F;
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            if (r[i] >= 0) sum += w[i] * v[i];
        }
    }
    routed[index] = sum;
    const float out = sum + gate * shared_part;
    y[index] = out;
    if (residual.x == nullptr) return;
    for (int64_t s = 0; s < residual.n_streams; ++s) {
        const int64_t ts = t * residual.n_streams + s;
        residual.x[ts * hidden + d] += residual.inject[ts] * out;
    }
}

unsigned blocks(int64_t n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

// Shared memory of one row of router_topk_kernel, and its rows per block: four, fewer when their
// probabilities would pass 48 KB.
size_t router_row_bytes(const model_data::qwen4_exp::Config& c) {
    return static_cast<size_t>(c.num_experts) * (sizeof(float) + 1) +
           static_cast<size_t>(c.num_experts_per_tok + 1) * sizeof(int);
}
int router_rows_per_block(const model_data::qwen4_exp::Config& c) {
    return static_cast<int>(std::clamp<size_t>((48U << 10) / router_row_bytes(c), 1, 4));
}

// Router logits and top-k of one layer on the device; with `record`, the trace's
// "moe.router_logits" and "moe.margin". experts/weights: device [T, top]. With `routing`, the
// same launch also routes the layer on the device (T ≤ router_rows_per_block).
void route(const DeviceMoeWeights& weights, const float* mix, int64_t n_rows, float* logits,
           float* margins, int32_t* experts, float* expert_weights, const DeviceContext& ctx,
           bool record, cudaStream_t stream, const DeviceRouting& routing = {}) {
    const auto& c = *ctx.config;
    const auto n_experts = static_cast<int>(c.num_experts);
    const auto top = static_cast<int>(c.num_experts_per_tok);
    linear_apply(weights.router, mix, n_rows, logits, stream);
    if (record) ctx.record("moe.router_logits", logits, n_rows * n_experts);
    const int rows = router_rows_per_block(c);
    CHERENKOV_ASSERT(routing.table == nullptr || n_rows <= rows, "one block routes the layer");
    // Routing on the device reuses the shared memory for the union (E ints) and a staged copy
    // of the rows' experts and weights (build_device_routing).
    const size_t routing_bytes =
        routing.table != nullptr
            ? (static_cast<size_t>(n_experts) + 2 * static_cast<size_t>(n_rows) * top) * 4
            : 0;
    const size_t shared_bytes = std::max(rows * router_row_bytes(c), routing_bytes);
    launch_dependent(router_topk_kernel, dim3(static_cast<unsigned>((n_rows + rows - 1) / rows)),
                     dim3(32 * rows), shared_bytes, stream, logits, static_cast<int>(n_rows),
                     n_experts, top, c.norm_topk_prob, experts, expert_weights,
                     record ? margins : nullptr, routing);
    if (record) ctx.record("moe.margin", margins, n_rows);
}

// Byte offsets in the pool's pinned host staging for one call.
struct StagingLayout {
    size_t readback = 0;  // per routing: experts [T·k] int32, then weights [T·k] float
    size_t combine = 0;   // part rows [T·k] int32, then part weights [T·k] float
    size_t slots = 0;     // [T·k] int32: the (row, slot) indices grouped by expert
    size_t tables = 0;    // ExpertAddress [min(E, T·k)]
    size_t tiles = 0;     // ExpertTokenTile [n_tiles]: prefill's grouped launches
    size_t n_tiles = 0;
    // Misses computed on the CPU (cpu_rows > 0): the call's mix rows [T, H] read back with the
    // routing, and the CPU's outputs [min(E, T·k)·T, H] at their rows of the device's parts.
    size_t mix = 0;
    size_t cpu_parts = 0;
    size_t total = 0;

    StagingLayout(int64_t tk, int n_routings, int64_t n_experts, int64_t cpu_rows, int64_t hidden) {
        const auto align = [](size_t v) { return (v + 15) / 16 * 16; };
        const auto words = static_cast<size_t>(tk) * 4;
        const auto n_union = static_cast<size_t>(std::min(n_experts, tk));
        combine = align(readback + static_cast<size_t>(n_routings) * 2 * words);
        slots = align(combine + 2 * words);
        tables = align(slots + words);
        tiles = align(tables + n_union * sizeof(ExpertAddress));
        n_tiles = static_cast<size_t>(max_expert_token_tiles(tk, static_cast<int64_t>(n_union)));
        const auto row_bytes = static_cast<size_t>(cpu_rows * hidden) * sizeof(float);
        mix = align(tiles + n_tiles * sizeof(ExpertTokenTile));
        cpu_parts = align(mix + row_bytes);
        total = cpu_parts + n_union * row_bytes;
    }
    bool has_cpu_rows() const { return cpu_parts > mix; }
};

// The routed experts of one layer, computed into per-(row, slot) outputs as they arrive: the
// residents first, then the device pool's misses as fetch_in_groups delivers them.
class RoutedExperts final : public ExpertReceiver {
public:
    RoutedExperts(const DeviceMoeWeights& weights, const float* mix, int64_t n_rows,
                  std::span<const int32_t> experts, std::byte* staging, const StagingLayout& layout,
                  const DeviceContext& ctx, DecodePhaseTimer& timer)
        : weights_(weights),
          ctx_(ctx),
          pool_(*ctx.expert_pool),
          mix_(mix),
          n_rows_(n_rows),
          top_(ctx.config->num_experts_per_tok),
          hidden_(ctx.config->hidden_size),
          inter_(ctx.config->moe_intermediate_size),
          experts_(experts),
          decode_(n_rows <= kMaxGemvRows),
          part_base_(static_cast<size_t>(ctx.config->num_experts), -1),
          first_slot_(static_cast<size_t>(ctx.config->num_experts) + 1, 0),
          staging_(staging),
          layout_(layout),
          timer_(timer),
          // Copies out of records that outlive their batch (a mapped table) are not waited for:
          // the compute stream waits for each before reading its slot, and the host goes on
          // queueing.
          wait_copies_(!ctx.experts->records_outlive_batches()),
          cpu_(decode_ && layout.has_cpu_rows() && ctx.cpu_experts != nullptr &&
                       ctx.cpu_experts->enabled()
                   ? ctx.cpu_experts
                   : nullptr) {}

    // Computes `requests` into parts(), fetching the ones the device pool lacks in groups the
    // source can pin; part_row() says where each (row, slot) landed.
    void run(std::span<const ExpertRequest> requests);

    // fetch_in_groups' calls for the misses: each record is uploaded and queued as it arrives,
    // a group's pending launch is flushed at its end, and its pins are dropped with it.
    bool deliver(const ExpertRequest& request, const ExpertWeights& expert) override;
    void before_blocking_wait() override {
        // The host would sit idle: queue the device's misses delivered so far.
        if (cpu_ != nullptr) queue_on_device();
    }
    void before_wait() override;
    void after_wait() override;
    void end_group() override;
    void release_group() noexcept override {
        // Their records go with the batch: a CPU job still reading them (an error unwound past
        // finish_on_cpu) is waited for first.
        if (cpu_ != nullptr) cpu_->wait_quietly();
        cpu_pending_.clear();
        device_pending_.clear();
        pool_.finish_batch(wait_copies_);
    }

    // Row of `parts()` holding (row t, slot j)'s output, or -1 when its expert was not delivered.
    int32_t part_row(int64_t t, int64_t j) const {
        const int32_t base = part_base_[static_cast<size_t>(experts_[t * top_ + j])];
        if (base < 0) return -1;
        return decode_ ? static_cast<int32_t>(base * n_rows_ + t)
                       : static_cast<int32_t>(t * top_ + j);
    }
    const float* parts() const { return parts_ ? parts_->data() : nullptr; }

private:
    void prepare(size_t n_union);
    void add_decode(int32_t expert, const ExpertWeights& host);
    void flush_decode();
    void run_prefill(int32_t expert, const ExpertWeights& host);
    void use_decode(int32_t expert, const DeviceExpert& device);
    void use_prefill(int32_t expert, const DeviceExpert& device);
    void flush_prefill();
    void compute_alone(int32_t expert, const DeviceExpert& device);
    // --cpu-experts: the first miss under auto, copied alone and timed; the group's misses dealt
    // to the CPU, started on its helper thread before the device's work is queued (residents
    // and copied misses: queue_on_device), then waited for and copied up into parts_.
    void add_decode_timed(int32_t expert, const ExpertWeights& host);
    void queue_on_device();
    void start_on_cpu();
    void finish_on_cpu();
    // Flushes whichever group is pending before an expert of `bits` is pinned: one launch takes
    // one precision, and the release after a launch must not unpin the next expert's slot
    // before its own kernels are queued.
    void before_acquire(int bits);
    void flush() { decode_ ? flush_decode() : flush_prefill(); }

    const DeviceMoeWeights& weights_;
    const DeviceContext& ctx_;
    DeviceExpertPool& pool_;
    const float* mix_;
    int64_t n_rows_;
    int64_t top_;
    int64_t hidden_;
    int64_t inter_;
    std::span<const int32_t> experts_;  // host [T, k]
    bool decode_;
    // Per expert: decode, its index in the address table (its parts start at base·T rows);
    // prefill, 0 once delivered. −1: not delivered.
    std::vector<int32_t> part_base_;
    std::vector<int32_t> first_slot_;  // [E + 1]: expert e's (row, slot)s in slots [first, next)
    std::byte* staging_;
    const StagingLayout& layout_;
    DecodePhaseTimer& timer_;
    bool wait_copies_;

    std::unique_ptr<DeviceScratch<float>> parts_;  // decode [U·T, H]; prefill [T·k, H]
    // Decode: address tables (device copy of the staging's), h scratch, pending group.
    std::unique_ptr<DeviceScratch<ExpertAddress>> tables_;
    std::unique_ptr<DeviceScratch<float>> h_;
    int group_ = 1;
    int n_table_ = 0;
    int first_pending_ = 0;
    ExpertShape pending_shape_;
    // Prefill: the (row, slot) indices by expert on the device; the grouped launches' pending
    // experts, token tiles on the device and h [T·k, I] (also tables_, pending_shape_); per
    // bits, whether expert_gemm takes them; the one-expert path's work arrays.
    std::unique_ptr<DeviceScratch<int32_t>> slots_;
    std::optional<ExpertGroup> prefill_group_;
    std::unique_ptr<DeviceScratch<ExpertTokenTile>> tiles_;
    bool grouped_bits_[9] = {};
    std::unique_ptr<DeviceScratch<float>> xg_, gg_, ug_, yg_;
    // Decode misses computed on the CPU, or null. Their parts take table indices from the top of
    // parts_ down (the device's take them from 0 up); cpu_base_ is the lowest taken so far.
    CpuExperts* cpu_;
    std::vector<std::pair<int32_t, ExpertWeights>> cpu_pending_;
    // With cpu_: residents (pinned) and device-dealt misses waiting for queue_on_device.
    std::vector<std::pair<int32_t, DeviceExpert>> residents_;
    std::vector<std::pair<int32_t, ExpertWeights>> device_pending_;
    // The running CPU job's experts and output rows (alive until finish_on_cpu), and the top of
    // its table indices: [cpu_base_, cpu_top_) are in flight.
    std::vector<ExpertWeights> cpu_experts_;
    std::vector<float*> cpu_outputs_;
    int cpu_top_ = 0;
    int cpu_base_ = 0;
    int64_t on_cpu_ = 0;
    int64_t on_device_ = 0;
};

void RoutedExperts::prepare(size_t n_union) {
    const cudaStream_t stream = ctx_.stream;
    const auto h = static_cast<size_t>(hidden_);
    if (decode_) {
        const auto inter = static_cast<size_t>(inter_);
        const auto t = static_cast<size_t>(n_rows_);
        group_ = static_cast<int>(std::min<int64_t>(kDecodeGroup, pool_.n_slots()));
        parts_ = std::make_unique<DeviceScratch<float>>(n_union * t * h, stream);
        tables_ = std::make_unique<DeviceScratch<ExpertAddress>>(n_union, stream);
        h_ =
            std::make_unique<DeviceScratch<float>>(static_cast<size_t>(group_) * t * inter, stream);
        return;
    }
    // Counting sort of the (row, slot) indices by expert, in increasing index within each.
    const auto tk = static_cast<size_t>(n_rows_ * top_);
    for (size_t i = 0; i < tk; ++i) ++first_slot_[static_cast<size_t>(experts_[i]) + 1];
    for (size_t e = 1; e < first_slot_.size(); ++e) first_slot_[e] += first_slot_[e - 1];
    auto* slots = reinterpret_cast<int32_t*>(staging_ + layout_.slots);
    std::vector<int32_t> fill(first_slot_.begin(), first_slot_.end() - 1);
    for (size_t i = 0; i < tk; ++i) {
        slots[fill[static_cast<size_t>(experts_[i])]++] = static_cast<int32_t>(i);
    }
    slots_ = std::make_unique<DeviceScratch<int32_t>>(tk, stream);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(slots_->data(), slots, tk * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream));
    parts_ = std::make_unique<DeviceScratch<float>>(tk * h, stream);
    tables_ = std::make_unique<DeviceScratch<ExpertAddress>>(n_union, stream);
    tiles_ = std::make_unique<DeviceScratch<ExpertTokenTile>>(layout_.n_tiles, stream);
    // A group may pin every slot: misses are acquired only after a full group's flush.
    const int capacity = static_cast<int>(std::min<int64_t>(pool_.n_slots(), INT_MAX));
    auto* tiles = reinterpret_cast<ExpertTokenTile*>(staging_ + layout_.tiles);
    prefill_group_.emplace(std::span<ExpertTokenTile>(tiles, layout_.n_tiles), capacity);
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    for (const int bits : {2, 3, 4, 8}) {
        const ExpertShape shape{hidden_, inter_, bits, pool_.layout().group_size};
        grouped_bits_[bits] = aligned(mix_) && expert_gemm_takes(shape);
    }
}

void RoutedExperts::run(std::span<const ExpertRequest> requests) {
    prepare(requests.size());
    cpu_base_ = static_cast<int>(requests.size());
    cpu_top_ = cpu_base_;
    // Experts already in the device pool are computed first and never asked of the host source
    // (which would read them again); only the device pool's misses are fetched.
    const int bits = pool_.layout().bits;
    std::vector<ExpertRequest> missing;
    for (const ExpertRequest& q : requests) {
        // With CPU experts the residents stay pinned, their kernels queued after the CPU's
        // share has started (end_group); the pool holds a whole decode union, pins included.
        if (cpu_ == nullptr) before_acquire(bits);
        const std::optional<DeviceExpert> device =
            pool_.acquire_resident(weights_.table_layer, q.expert, bits);
        if (!device) {
            missing.push_back(q);
        } else if (cpu_ != nullptr) {
            residents_.emplace_back(q.expert, *device);
        } else if (decode_) {
            use_decode(q.expert, *device);
        } else {
            use_prefill(q.expert, *device);
        }
    }
    flush();
    timer_.lap(&DecodePhases::prepare_seconds);
    // Requests cut by the source (ExpertBatch::cut_requests) stay undelivered: part_base −1.
    fetch_in_groups(*ctx_.experts, weights_.table_layer, missing, *this);
    if (cpu_ != nullptr) {
        queue_on_device();  // residents, when nothing was missing
        flush();
        cpu_->end_call(on_cpu_, on_device_);
    }
}

bool RoutedExperts::deliver(const ExpertRequest& request, const ExpertWeights& expert) {
    if (cpu_ != nullptr && cpu_->needs_copy_seconds()) {
        add_decode_timed(request.expert, expert);
        ++on_device_;
    } else if (cpu_ != nullptr && cpu_->takes_next(on_cpu_, on_device_)) {
        cpu_pending_.emplace_back(request.expert, expert);
        ++on_cpu_;
    } else if (cpu_ != nullptr) {
        // Copied and queued once the CPU's share has started, or before the host blocks.
        device_pending_.emplace_back(request.expert, expert);
        ++on_device_;
    } else if (decode_) {
        add_decode(request.expert, expert);
    } else {
        run_prefill(request.expert, expert);
    }
    timer_.lap(&DecodePhases::miss_queue_seconds);
    return true;
}

void RoutedExperts::before_wait() {
    // The device may run dry while the host waits for a record: a handoff gap.
    if (ctx_.stages != nullptr) ctx_.stages->pause();
}

void RoutedExperts::after_wait() {
    if (ctx_.stages != nullptr) ctx_.stages->resume();
    timer_.lap(&DecodePhases::read_wait_seconds);
}

void RoutedExperts::end_group() {
    // The CPU's share first, on its helper thread; the device's work is queued meanwhile.
    start_on_cpu();
    queue_on_device();
    flush();
    timer_.lap(&DecodePhases::miss_queue_seconds);
    finish_on_cpu();
    timer_.lap(&DecodePhases::cpu_experts_seconds);
    if (wait_copies_) pool_.wait_host_copies();
    timer_.lap(&DecodePhases::copy_wait_seconds);
}

void RoutedExperts::before_acquire(int bits) {
    if (decode_) {
        if (n_table_ > first_pending_ && bits != pending_shape_.bits) flush_decode();
    } else if (!prefill_group_->accepts(bits)) {
        // Also empties the group before an expert of bits expert_gemm does not take, whose
        // one-at-a-time path releases the pins.
        flush_prefill();
    }
}

void RoutedExperts::add_decode(int32_t expert, const ExpertWeights& host) {
    before_acquire(host.bits);
    use_decode(expert, pool_.acquire(weights_.table_layer, expert, host));
}

void RoutedExperts::use_decode(int32_t expert, const DeviceExpert& device) {
    pending_shape_ = device.shape;
    auto* tables = reinterpret_cast<ExpertAddress*>(staging_ + layout_.tables);
    tables[n_table_] = device.address;
    part_base_[static_cast<size_t>(expert)] = n_table_;
    ++n_table_;
    if (n_table_ - first_pending_ >= group_) flush_decode();
}

void RoutedExperts::flush_decode() {
    const int n = n_table_ - first_pending_;
    if (n == 0) return;
    const cudaStream_t stream = ctx_.stream;
    const auto* tables = reinterpret_cast<const ExpertAddress*>(staging_ + layout_.tables);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(tables_->data() + first_pending_, tables + first_pending_,
                                         static_cast<size_t>(n) * sizeof(ExpertAddress),
                                         cudaMemcpyHostToDevice, stream));
    affine_experts_swiglu_parts(
        pending_shape_, tables_->data() + first_pending_, n, mix_, static_cast<int>(n_rows_),
        h_->data(), parts_->data() + static_cast<size_t>(first_pending_) * n_rows_ * hidden_,
        stream);
    pool_.release_pinned();
    first_pending_ = n_table_;
}

void RoutedExperts::add_decode_timed(int32_t expert, const ExpertWeights& host) {
    // Nothing else on the copy stream, so the wait below measures this record's copy (the slot
    // it replaces was last read by an earlier layer's kernels, done at the routing read-back).
    pool_.wait_host_copies();
    const auto start = std::chrono::steady_clock::now();
    add_decode(expert, host);
    pool_.wait_host_copies();
    cpu_->set_copy_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void RoutedExperts::queue_on_device() {
    for (const auto& [expert, device] : residents_) {
        before_acquire(device.shape.bits);
        use_decode(expert, device);
    }
    residents_.clear();
    for (const auto& [expert, weights] : device_pending_) add_decode(expert, weights);
    device_pending_.clear();
}

void RoutedExperts::start_on_cpu() {
    if (cpu_pending_.empty()) return;
    const auto row_floats = static_cast<size_t>(n_rows_ * hidden_);
    const auto* mix = reinterpret_cast<const float*>(staging_ + layout_.mix);
    auto* outputs = reinterpret_cast<float*>(staging_ + layout_.cpu_parts);
    cpu_top_ = cpu_base_;
    cpu_experts_.clear();
    cpu_outputs_.clear();
    for (const auto& [expert, weights] : cpu_pending_) {
        const int base = --cpu_base_;
        cpu_experts_.push_back(weights);
        cpu_outputs_.push_back(outputs + static_cast<size_t>(base) * row_floats);
        part_base_[static_cast<size_t>(expert)] = base;
    }
    cpu_pending_.clear();
    cpu_->start(cpu_experts_, mix, n_rows_, cpu_outputs_);
}

void RoutedExperts::finish_on_cpu() {
    if (cpu_top_ == cpu_base_) return;
    cpu_->wait();
    const auto row_floats = static_cast<size_t>(n_rows_ * hidden_);
    const auto* outputs = reinterpret_cast<const float*>(staging_ + layout_.cpu_parts);
    const auto offset = static_cast<size_t>(cpu_base_) * row_floats;
    CHERENKOV_CUDA_CHECK(
        cudaMemcpyAsync(parts_->data() + offset, outputs + offset,
                        static_cast<size_t>(cpu_top_ - cpu_base_) * row_floats * sizeof(float),
                        cudaMemcpyHostToDevice, ctx_.stream));
    cpu_top_ = cpu_base_;
}

void RoutedExperts::run_prefill(int32_t expert, const ExpertWeights& host) {
    before_acquire(host.bits);
    use_prefill(expert, pool_.acquire(weights_.table_layer, expert, host));
}

void RoutedExperts::use_prefill(int32_t expert, const DeviceExpert& device) {
    if (!grouped_bits_[device.shape.bits]) {
        compute_alone(expert, device);
        return;
    }
    const int32_t first = first_slot_[static_cast<size_t>(expert)];
    const int32_t n = first_slot_[static_cast<size_t>(expert) + 1] - first;
    const int32_t entry = prefill_group_->add(device.shape.bits, first, n);
    auto* tables = reinterpret_cast<ExpertAddress*>(staging_ + layout_.tables);
    tables[entry] = device.address;
    pending_shape_ = device.shape;
    part_base_[static_cast<size_t>(expert)] = 0;
    if (prefill_group_->full()) flush_prefill();
}

void RoutedExperts::flush_prefill() {
    ExpertGroup& group = *prefill_group_;
    if (group.empty()) return;
    const cudaStream_t stream = ctx_.stream;
    const int32_t first_entry = group.first_entry();
    const int32_t first_tile = group.first_tile();
    const auto n_entries = static_cast<size_t>(group.n_entries() - first_entry);
    const auto n_tiles = static_cast<size_t>(group.n_tiles() - first_tile);
    const auto* tables = reinterpret_cast<const ExpertAddress*>(staging_ + layout_.tables);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(tables_->data() + first_entry, tables + first_entry,
                                         n_entries * sizeof(ExpertAddress), cudaMemcpyHostToDevice,
                                         stream));
    CHERENKOV_CUDA_CHECK(
        cudaMemcpyAsync(tiles_->data() + first_tile, group.tiles().data() + first_tile,
                        n_tiles * sizeof(ExpertTokenTile), cudaMemcpyHostToDevice, stream));
    if (!h_) {  // [T·k, I], rows indexed like parts_
        h_ = std::make_unique<DeviceScratch<float>>(static_cast<size_t>(n_rows_ * top_ * inter_),
                                                    stream);
    }
    const ExpertGemmTiles launch{
        pending_shape_, tables_->data(), tiles_->data() + first_tile, static_cast<int>(n_tiles),
        slots_->data(), n_rows_ * top_};
    expert_gemm_gate_up(launch, mix_, static_cast<int>(top_), h_->data(), stream);
    expert_gemm_down(launch, h_->data(), parts_->data(), stream);
    pool_.release_pinned();
    group.launched();
}

// One expert's (row, slot)s gathered, multiplied by affine_matmul and scattered back: for the
// shapes expert_gemm does not take (3 bits, group 32, devices before sm_80).
void RoutedExperts::compute_alone(int32_t expert, const DeviceExpert& device) {
    const cudaStream_t stream = ctx_.stream;
    const int32_t first = first_slot_[static_cast<size_t>(expert)];
    const int32_t n = first_slot_[static_cast<size_t>(expert) + 1] - first;
    if (!xg_) {
        const auto h = static_cast<size_t>(hidden_);
        const auto inter = static_cast<size_t>(inter_);
        const auto t = static_cast<size_t>(n_rows_);
        xg_ = std::make_unique<DeviceScratch<float>>(t * h, stream);
        gg_ = std::make_unique<DeviceScratch<float>>(t * inter, stream);
        ug_ = std::make_unique<DeviceScratch<float>>(t * inter, stream);
        yg_ = std::make_unique<DeviceScratch<float>>(t * h, stream);
    }
    if (n > 0) {
        const int32_t* slots = slots_->data() + first;
        const dim3 grid(blocks(hidden_, kElementwiseThreads), static_cast<unsigned>(n));
        launch_dependent(gather_rows_kernel, grid, dim3(kElementwiseThreads), 0, stream, mix_,
                         slots, static_cast<int>(top_), static_cast<int>(hidden_), xg_->data());
        const auto h = static_cast<size_t>(hidden_);
        const auto inter = static_cast<size_t>(inter_);
        affine_matmul(device.gate(), xg_->data(), h, n, gg_->data(), inter, stream);
        affine_matmul(device.up(), xg_->data(), h, n, ug_->data(), inter, stream);
        const int64_t n_h = static_cast<int64_t>(n) * inter_;
        launch_dependent(silu_mul_kernel, dim3(blocks(n_h, kElementwiseThreads)),
                         dim3(kElementwiseThreads), 0, stream, gg_->data(), ug_->data(), n_h);
        affine_matmul(device.down(), gg_->data(), inter, n, yg_->data(), h, stream);
        launch_dependent(scatter_rows_kernel, grid, dim3(kElementwiseThreads), 0, stream,
                         yg_->data(), slots, static_cast<int>(hidden_), parts_->data());
    }
    pool_.release_pinned();
    part_base_[static_cast<size_t>(expert)] = 0;
}

// The shared expert (no IO): shared = down(silu(gate·x) ⊙ up·x) [T, H], gate [T].
void shared_expert(const DeviceMoeWeights& weights, const float* mix, int64_t n_rows, float* shared,
                   float* gate, const DeviceContext& ctx) {
    const int64_t inter = weights.shared_gate.out_features();
    if (weights.shared_expert != nullptr && n_rows <= kMaxGemvRows &&
        reinterpret_cast<uintptr_t>(mix) % 16 == 0) {
        DeviceScratch<float> h(static_cast<size_t>(n_rows * inter), ctx.stream);
        affine_experts_swiglu_parts(weights.shared_shape, weights.shared_expert, 1, mix,
                                    static_cast<int>(n_rows), h.data(), shared, ctx.stream);
        ctx.record("moe.shared_out", shared, n_rows * ctx.config->hidden_size);
        linear_apply(weights.shared_expert_gate, mix, n_rows, gate, ctx.stream);
        return;
    }
    DeviceScratch<float> g(static_cast<size_t>(n_rows * inter), ctx.stream);
    DeviceScratch<float> u(static_cast<size_t>(n_rows * inter), ctx.stream);
    linear_apply(weights.shared_gate, mix, n_rows, g.data(), ctx.stream);
    linear_apply(weights.shared_up, mix, n_rows, u.data(), ctx.stream);
    launch_dependent(silu_mul_kernel, dim3(blocks(n_rows * inter, kElementwiseThreads)),
                     dim3(kElementwiseThreads), 0, ctx.stream, g.data(), u.data(), n_rows * inter);
    linear_apply(weights.shared_down, g.data(), n_rows, shared, ctx.stream);
    ctx.record("moe.shared_out", shared, n_rows * ctx.config->hidden_size);
    linear_apply(weights.shared_expert_gate, mix, n_rows, gate, ctx.stream);
}

// A pool that can hold the whole table loads the experts of a layer its rows have not routed to
// yet once at most an eighth of the layer (or one expert) is missing, so that the layer is then
// routed on the device (moe_on_device): rarely chosen experts would otherwise keep it on the host
// path long after the rest is in. Costs one read of those records, once. Records the source
// delivers at other bits (mixed precision) do not complete a layer: the layer is then left as it
// is.
class LayerCompletion final : public ExpertReceiver {
public:
    LayerCompletion(DeviceExpertPool& pool, int64_t layer) : pool_(pool), layer_(layer) {}

    bool deliver(const ExpertRequest& request, const ExpertWeights& expert) override {
        if (expert.bits != pool_.layout().bits) {
            pool_.leave_incomplete(layer_);
            return false;
        }
        pool_.acquire(layer_, request.expert, expert);
        return true;
    }
    // The copies out of the group's records complete before its batch goes.
    void release_group() noexcept override { pool_.finish_batch(); }

private:
    DeviceExpertPool& pool_;
    int64_t layer_;
};

void complete_layer(const DeviceMoeWeights& weights, const DeviceContext& ctx) {
    DeviceExpertPool& pool = *ctx.expert_pool;
    const int64_t layer = weights.table_layer;
    const int64_t n_experts = ctx.config->num_experts;
    const std::vector<int32_t> missing =
        pool.missing_in_layer(layer, std::max<int64_t>(n_experts / 8, 1));
    if (missing.empty()) return;
    std::vector<ExpertRequest> requests;
    // Full weight: these are wanted whole, never cut as weak (--cut-weak).
    for (const int32_t e : missing) requests.push_back(ExpertRequest{e, 1.0F});
    LayerCompletion completion(pool, layer);
    fetch_in_groups(*ctx.experts, layer, requests, completion);
}

}  // namespace

namespace {

struct RouteShape {
    int64_t top;
    int64_t tk;
    int n_routings;
    StagingLayout layout;
};

RouteShape route_shape(const DeviceMoeWeights* next, int64_t n_rows, const DeviceContext& ctx) {
    const auto& c = *ctx.config;
    CHERENKOV_ASSERT(ctx.experts != nullptr && ctx.expert_pool != nullptr,
                     "moe_forward needs an expert source and a device pool");
    // The pool's events fence copies against the kernels of its compute stream.
    CHERENKOV_ASSERT(ctx.expert_pool->compute_stream() == static_cast<void*>(ctx.stream),
                     "the expert pool was made for ctx.stream");
    CHERENKOV_ASSERT(c.num_experts_per_tok >= 1 && c.num_experts_per_tok <= c.num_experts,
                     "validated config");
    const int64_t top = c.num_experts_per_tok;
    const int n_routings = next != nullptr ? 2 : 1;
    // A decode call whose misses may go to the CPU reads its mix rows back with the routing.
    const bool cpu_rows = n_rows <= kMaxGemvRows && ctx.cpu_experts != nullptr &&
                          ctx.cpu_experts->enabled() && ctx.trace == nullptr &&
                          ctx.routing_trace == nullptr;
    return RouteShape{top, n_rows * top, n_routings,
                      StagingLayout(n_rows * top, n_routings, c.num_experts, cpu_rows ? n_rows : 0,
                                    c.hidden_size)};
}

}  // namespace

void moe_route(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
               int64_t n_rows, const DeviceContext& ctx) {
    if (n_rows <= 0) return;
    const RouteShape shape = route_shape(next, n_rows, ctx);
    const cudaStream_t stream = ctx.stream;
    const int64_t tk = shape.tk;
    // Before anything this call queues reads the staging (growing it synchronizes the stream).
    auto* staging = static_cast<std::byte*>(ctx.expert_pool->host_staging(shape.layout.total));
    // Routing of this layer and, for lookahead, of the next one on the same rows; one read-back.
    DeviceScratch<float> logits(static_cast<size_t>(n_rows * ctx.config->num_experts), stream);
    DeviceScratch<float> margins(static_cast<size_t>(n_rows), stream);
    DeviceScratch<int32_t> routing(static_cast<size_t>(shape.n_routings * 2 * tk), stream);
    int32_t* r = routing.data();
    // The next layer's router (lookahead) runs on a side stream beside this one's.
    const SideStreams* side = next != nullptr && ctx.trace == nullptr ? ctx.side : nullptr;
    DeviceScratch<float> next_logits(
        side != nullptr ? static_cast<size_t>(n_rows * ctx.config->num_experts) : 0, stream);
    if (side != nullptr) side->fork(stream, 1);
    route(weights, mix, n_rows, logits.data(), margins.data(), r, reinterpret_cast<float*>(r + tk),
          ctx, true, stream);
    if (next != nullptr) {
        route(*next, mix, n_rows, side != nullptr ? next_logits.data() : logits.data(), nullptr,
              r + 2 * tk, reinterpret_cast<float*>(r + 3 * tk), ctx, false,
              side != nullptr ? side->get(0) : stream);
    }
    if (side != nullptr) side->join(stream, 1);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(staging + shape.layout.readback, r,
                                         routing.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                         stream));
    if (shape.layout.has_cpu_rows()) {
        CHERENKOV_CUDA_CHECK(
            cudaMemcpyAsync(staging + shape.layout.mix, mix,
                            static_cast<size_t>(n_rows * ctx.config->hidden_size) * sizeof(float),
                            cudaMemcpyDeviceToHost, stream));
    }
}

namespace {

// The routed experts' shape at the device pool's precision (the layers routed on the device hold
// every expert at it).
ExpertShape pool_expert_shape(const DeviceContext& ctx) {
    const store::ExpertLayout& layout = ctx.expert_pool->layout();
    return ExpertShape{ctx.config->hidden_size, ctx.config->moe_intermediate_size, layout.bits,
                       layout.group_size};
}

}  // namespace

const ExpertAddress* moe_on_device(const DeviceMoeWeights& weights, int64_t n_rows,
                                   const DeviceContext& ctx) {
    // Traces read the routing back.
    if (n_rows < 1 || ctx.trace != nullptr || ctx.routing_trace != nullptr ||
        ctx.expert_pool == nullptr) {
        return nullptr;
    }
    const auto& c = *ctx.config;
    if (n_rows <= kMaxGemvRows) {
        // The decode experts' kernels take 1-4 rows, routed by one block.
        if (n_rows > router_rows_per_block(c)) return nullptr;
    } else {
        // Prefill: the grouping kernel and the token-tiled GEMMs must take the layer.
        if (c.num_experts > kMaxGroupedExperts || !expert_gemm_takes(pool_expert_shape(ctx)))
            return nullptr;
    }
    return ctx.expert_pool->layer_addresses(weights.table_layer);
}

namespace {

// moe_forward_on_device for a prefill call: the router, group_by_expert and the two grouped
// expert GEMMs on the compute stream, the shared expert on a side stream, then the combine; the
// same arithmetic as moe_finish's grouped launches, without the read-back.
void prefill_on_device(const DeviceMoeWeights& weights, const ExpertAddress* addresses,
                       const float* mix, int64_t n_rows, float* y, const DeviceContext& ctx,
                       const ResidualUpdate& residual) {
    const auto& c = *ctx.config;
    const cudaStream_t stream = ctx.stream;
    CHERENKOV_ASSERT(reinterpret_cast<uintptr_t>(mix) % 16 == 0, "layer arena rows are aligned");
    const int64_t h = c.hidden_size;
    const int64_t top = c.num_experts_per_tok;
    const int64_t tk = n_rows * top;
    const auto n_tk = static_cast<size_t>(tk);
    const ExpertShape shape = pool_expert_shape(ctx);

    DeviceScratch<float> shared(static_cast<size_t>(n_rows * h), stream);
    DeviceScratch<float> shared_gate(static_cast<size_t>(n_rows), stream);
    const SideStreams* side = ctx.side;
    DeviceContext shared_ctx = ctx;
    if (side != nullptr) {
        side->fork(stream, 1);
        shared_ctx.stream = side->get(0);
    }
    shared_expert(weights, mix, n_rows, shared.data(), shared_gate.data(), shared_ctx);

    DeviceScratch<float> logits(static_cast<size_t>(n_rows * c.num_experts), stream);
    DeviceScratch<int32_t> routing(2 * n_tk, stream);
    auto* routing_weights = reinterpret_cast<float*>(routing.data() + tk);
    route(weights, mix, n_rows, logits.data(), nullptr, routing.data(), routing_weights, ctx, false,
          stream);
    const int64_t max_tiles = max_expert_token_tiles(tk, std::min<int64_t>(c.num_experts, tk));
    DeviceScratch<int32_t> slots(n_tk, stream);
    DeviceScratch<ExpertTokenTile> tiles(static_cast<size_t>(max_tiles), stream);
    DeviceScratch<int32_t> n_tiles(1, stream);
    DeviceScratch<int32_t> combine(2 * n_tk, stream);
    auto* part_weights = reinterpret_cast<float*>(combine.data() + tk);
    const DeviceExpertGroups groups{slots.data(),   tiles.data(), n_tiles.data(),
                                    combine.data(), part_weights, ctx.expert_pool->device_hits()};
    group_by_expert(routing.data(), routing_weights, n_rows, static_cast<int>(top),
                    static_cast<int>(c.num_experts), groups, stream);
    DeviceScratch<float> h_rows(n_tk * static_cast<size_t>(c.moe_intermediate_size), stream);
    DeviceScratch<float> parts(n_tk * static_cast<size_t>(h), stream);
    const ExpertGemmTiles launch{
        shape,        addresses, tiles.data(),  static_cast<int>(max_tiles),
        slots.data(), tk,        n_tiles.data()};
    expert_gemm_gate_up(launch, mix, static_cast<int>(top), h_rows.data(), stream);
    expert_gemm_down(launch, h_rows.data(), parts.data(), stream);
    if (side != nullptr) side->join(stream, 1);
    DeviceScratch<float> routed(static_cast<size_t>(n_rows * h), stream);
    launch_dependent(moe_combine_kernel, dim3(blocks(n_rows * h, kElementwiseThreads)),
                     dim3(kElementwiseThreads), 0, stream, parts.data(), combine.data(),
                     part_weights, static_cast<int>(top), shared.data(), shared_gate.data(),
                     static_cast<int>(n_rows), static_cast<int>(h), routed.data(), y, residual);
}

}  // namespace

void moe_forward_on_device(const DeviceMoeWeights& weights, const ExpertAddress* addresses,
                           const float* mix, int64_t n_rows, float* y, const DeviceContext& ctx,
                           const ResidualUpdate& residual) {
    if (n_rows > kMaxGemvRows) {
        prefill_on_device(weights, addresses, mix, n_rows, y, ctx, residual);
        return;
    }
    const auto& c = *ctx.config;
    const cudaStream_t stream = ctx.stream;
    const int64_t h = c.hidden_size;
    const int64_t top = c.num_experts_per_tok;
    const int64_t tk = n_rows * top;
    const auto n_tk = static_cast<size_t>(tk);
    const DeviceExpertPool& pool = *ctx.expert_pool;
    const ExpertShape shape = pool_expert_shape(ctx);
    // The shared expert rides in the routed launches as table entry 0 when it has their shape.
    const ExpertShape& s = weights.shared_shape;
    const bool shared_inside = weights.shared_expert != nullptr && s.hidden == shape.hidden &&
                               s.intermediate == shape.intermediate && s.bits == shape.bits &&
                               s.group_size == shape.group_size;
    const int n_first = shared_inside ? 1 : 0;
    const auto capacity = static_cast<int>(std::min<int64_t>(c.num_experts, tk)) + n_first;

    DeviceScratch<float> logits(static_cast<size_t>(n_rows * c.num_experts), stream);
    DeviceScratch<int32_t> routing(2 * n_tk, stream);
    auto* routing_weights = reinterpret_cast<float*>(routing.data() + tk);
    DeviceScratch<ExpertAddress> table(static_cast<size_t>(capacity), stream);
    DeviceScratch<int32_t> n_table(1, stream);
    DeviceScratch<int32_t> combine(2 * n_tk, stream);
    DeviceRouting on_device;
    on_device.addresses = addresses;
    on_device.first = shared_inside ? weights.shared_expert : nullptr;
    on_device.table = table.data();
    on_device.n_table = n_table.data();
    on_device.part_rows = combine.data();
    on_device.part_weights = reinterpret_cast<float*>(combine.data() + tk);
    on_device.hits = pool.device_hits();
    DeviceScratch<float> shared(shared_inside ? 0 : static_cast<size_t>(n_rows * h), stream);
    DeviceScratch<float> shared_gate(static_cast<size_t>(n_rows), stream);
    DeviceScratch<float> h_scratch(static_cast<size_t>(capacity * n_rows * c.moe_intermediate_size),
                                   stream);
    DeviceScratch<float> parts(static_cast<size_t>(capacity * n_rows * h), stream);

    // The shared expert's gate (and the shared expert when it is not in the routed launches) on a
    // side stream beside the routing and the routed experts: only the combine needs them. A shared
    // expert that takes the one-launch kernel stays on the main stream: two of those launches must
    // never run at once (expert_layer.h).
    const bool shared_alone_in_one_launch =
        !shared_inside && weights.shared_expert != nullptr &&
        layer_experts_take(weights.shared_shape, static_cast<int>(n_rows));
    const SideStreams* side =
        ctx.trace == nullptr && !shared_alone_in_one_launch ? ctx.side : nullptr;
    DeviceContext shared_ctx = ctx;
    if (side != nullptr) {
        side->fork(stream, 1);
        shared_ctx.stream = side->get(0);
    }
    if (shared_inside) {
        linear_apply(weights.shared_expert_gate, mix, n_rows, shared_gate.data(),
                     shared_ctx.stream);
    } else {
        shared_expert(weights, mix, n_rows, shared.data(), shared_gate.data(), shared_ctx);
    }
    route(weights, mix, n_rows, logits.data(), nullptr, routing.data(), routing_weights, ctx, false,
          stream, on_device);
    affine_experts_swiglu_parts(shape, table.data(), capacity, mix, static_cast<int>(n_rows),
                                h_scratch.data(), parts.data(), stream, n_table.data());
    if (side != nullptr) side->join(stream, 1);
    DeviceScratch<float> routed(static_cast<size_t>(n_rows * h), stream);
    launch_dependent(moe_combine_kernel, dim3(blocks(n_rows * h, kElementwiseThreads)),
                     dim3(kElementwiseThreads), 0, stream, parts.data(), combine.data(),
                     reinterpret_cast<const float*>(combine.data() + tk), static_cast<int>(top),
                     shared_inside ? parts.data() : shared.data(), shared_gate.data(),
                     static_cast<int>(n_rows), static_cast<int>(h), routed.data(), y, residual);
}

void moe_forward(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
                 int64_t n_rows, float* y, const DeviceContext& ctx) {
    moe_route(weights, next, mix, n_rows, ctx);
    moe_finish(weights, next, mix, n_rows, y, ctx);
}

namespace {

// Decode, records mapped (they outlive their batch, so a copy never holds the host up): the
// next layer's strongest predicted experts that the device pool lacks, up to
// ctx.next_layer_copies of them, are copied into it now. The copy stream takes them behind this
// layer's misses, and they land while the device runs the combine and the next layer's mixer,
// when the copy engine would otherwise idle; a right prediction is a hit there, a wrong one a
// slot taken from the least recently used. Other sources would make the host wait for reads or
// copies, so they are left to the host cache's own lookahead.
void copy_next_layer_ahead(int64_t next_layer, std::span<const ExpertRequest> predicted,
                           const DeviceContext& ctx) {
    if (ctx.next_layer_copies <= 0 || !ctx.experts->records_outlive_batches()) return;
    DeviceExpertPool& pool = *ctx.expert_pool;
    const int bits = pool.layout().bits;
    std::vector<ExpertRequest> copies;
    for (const ExpertRequest& q : predicted) {  // strongest first (union_of)
        if (std::ssize(copies) >= ctx.next_layer_copies) break;
        if (!pool.resident(next_layer, q.expert, bits)) copies.push_back(q);
    }
    if (copies.empty()) return;
    const std::unique_ptr<ExpertBatch> batch = ctx.experts->fetch(next_layer, copies);
    size_t index = 0;
    ExpertWeights record;
    while (batch->next(&index, &record)) pool.copy_ahead(next_layer, copies[index].expert, record);
    // Nothing reads the slots yet: the release only unpins them (the records outlive the batch,
    // so the copies are not waited for).
    pool.finish_batch(false);
}

}  // namespace

void moe_finish(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
                int64_t n_rows, float* y, const DeviceContext& ctx,
                const ResidualUpdate& residual) {
    if (n_rows <= 0) return;
    const RouteShape shape = route_shape(next, n_rows, ctx);
    const cudaStream_t stream = ctx.stream;
    const int64_t h = ctx.config->hidden_size;
    const int64_t top = shape.top;
    const int64_t tk = shape.tk;
    const StagingLayout& layout = shape.layout;
    // The same buffer moe_route read back into (its size was grown there).
    auto* staging = static_cast<std::byte*>(ctx.expert_pool->host_staging(layout.total));
    DecodePhaseTimer timer(ctx.phases);
    if (ctx.stages != nullptr) ctx.stages->pause();
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream));
    timer.lap(&DecodePhases::routing_wait_seconds);
    const auto* experts = reinterpret_cast<const int32_t*>(staging + layout.readback);
    const auto* expert_weights = reinterpret_cast<const float*>(experts + tk);
    const auto n_tk = static_cast<size_t>(tk);
    const std::vector<ExpertRequest> requests = union_of({experts, n_tk}, {expert_weights, n_tk});
    if (ctx.routing_trace != nullptr) {
        write_trace_layer(*ctx.routing_trace, ctx.trace_step, weights.table_layer, top,
                          {experts, n_tk}, {expert_weights, n_tk});
    }

    // Lookahead before this layer's fetch, so the source can queue those reads behind its misses.
    if (next != nullptr) {
        const int32_t* next_experts = experts + 2 * tk;
        const auto* next_weights = reinterpret_cast<const float*>(next_experts + tk);
        const DeviceExpertPool& pool = *ctx.expert_pool;
        const int64_t next_layer = next->table_layer;
        const int bits = pool.layout().bits;
        // Device-resident experts need no host read.
        predict_next(*ctx.experts, next_layer, {next_experts, n_tk}, {next_weights, n_tk},
                     [&](int32_t e) { return !pool.resident(next_layer, e, bits); });
    }

    // Shared expert first: the device works on it while the first records are fetched.
    DeviceScratch<float> shared(static_cast<size_t>(n_rows * h), stream);
    DeviceScratch<float> shared_gate(static_cast<size_t>(n_rows), stream);
    if (ctx.stages != nullptr) ctx.stages->resume();
    shared_expert(weights, mix, n_rows, shared.data(), shared_gate.data(), ctx);

    RoutedExperts routed_experts(weights, mix, n_rows, {experts, n_tk}, staging, layout, ctx,
                                 timer);
    routed_experts.run(requests);

    // Each row's delivered outputs in increasing expert index (never delivery order), the order
    // the CPU sums them in.
    auto* part_rows = reinterpret_cast<int32_t*>(staging + layout.combine);
    auto* part_weights = reinterpret_cast<float*>(part_rows + tk);
    const std::vector<int64_t> order = slots_in_expert_order({experts, n_tk}, top);
    for (int64_t t = 0; t < n_rows; ++t) {
        int64_t m = 0;
        for (int64_t k = 0; k < top; ++k) {
            const int64_t slot = order[static_cast<size_t>(t * top + k)];
            const int32_t row = routed_experts.part_row(t, slot - t * top);
            if (row < 0) continue;  // cut by the source (--cut-weak)
            part_rows[t * top + m] = row;
            part_weights[t * top + m] = expert_weights[slot];
            ++m;
        }
        for (; m < top; ++m) {
            part_rows[t * top + m] = -1;
            part_weights[t * top + m] = 0.0F;
        }
    }
    DeviceScratch<int32_t> combine(2 * n_tk, stream);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(combine.data(), part_rows, 2 * n_tk * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream));
    DeviceScratch<float> routed(static_cast<size_t>(n_rows * h), stream);
    launch_dependent(moe_combine_kernel, dim3(blocks(n_rows * h, kElementwiseThreads)),
                     dim3(kElementwiseThreads), 0, stream, routed_experts.parts(), combine.data(),
                     reinterpret_cast<const float*>(combine.data() + tk), static_cast<int>(top),
                     shared.data(), shared_gate.data(), static_cast<int>(n_rows),
                     static_cast<int>(h), routed.data(), y, residual);
    if (next != nullptr && n_rows <= kMaxGemvRows) {
        const int32_t* next_experts = experts + 2 * tk;
        const auto* next_weights = reinterpret_cast<const float*>(next_experts + tk);
        copy_next_layer_ahead(next->table_layer,
                              union_of({next_experts, n_tk}, {next_weights, n_tk}), ctx);
    }
    ctx.record("moe.routed_out", routed.data(), n_rows * h);
    ctx.record("moe.out", y, n_rows * h);
    complete_layer(weights, ctx);
    timer.lap(&DecodePhases::finish_seconds);
}

}  // namespace cherenkov::engine::cuda
