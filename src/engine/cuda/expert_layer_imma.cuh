// The routed experts of one decode MoE layer in one launch (Hopper; 4-bit codes in groups of 64):
//   h[e][t]     = silu(gate_e·x_t) ⊙ (up_e·x_t)
//   parts[e][t] = down_e·h[e][t]
// for 1-4 rows t, with the integer tensor cores (mma.sync m16n8k32, u8 codes × s8 digits).
//
// Why one launch: at one row a layer's experts are ~28 MB, ~6 µs of HBM time, and the two
// dependent launches of the bulk kernels spend as long again on ramps, tails and the hand-off
// (docs/gemv-tensor-core.md). Here one block per multiprocessor has a copy warp ask the bulk copy
// engine for its items' bytes, two items in flight at a time (kItemsInFlight), into a ring of
// slots in shared memory nearly as deep as the block's work (at one row 9 slots for 9-10 items,
// so a landed item waits for its team, not the copies for a slot), while five teams of four
// warps multiply each item as it lands:
//   gate/up item  8 intermediate rows of one expert (8 gate + 8 up rows: one m16 tile, so SwiGLU is
//                 in-lane), over all of K; it publishes its 8 values of h, tagged with the
//                 launch (store_tagged: no fence)
//   down item     64 output rows of one expert; it reads its expert's h until every value carries
//                 the launch's tag, then quantizes it
// Items are numbered gate/up first, then down, and block b takes items b, b + grid, …, so every
// block's gate/up items come before its down items: a down item only ever waits for gate/up items
// of running blocks, which wait for nothing (every block is resident, one per multiprocessor, and
// no other launch of this kernel may run beside it: expert_layer.h).
//
// Arithmetic: x (and h) per group of 64 as 23-bit fixed point, a power-of-two scale 2^(e−22) with
// |x_int| ≤ 2^22, written as three balanced base-256 digits. One mma takes 32 codes of 16 rows from
// two groups at once (lanes c = 0, 1 of a quad hold the first group's codes, c = 2, 3 the second's)
// against six digit columns (3 per group), so a lane's 16-byte load of a row is two groups' codes.
// Per group the float epilogue adds scale·2^(e−22)·D per digit column and bias·Σx; the columns are
// weighed by 1, 256, 65536 once at the end. A row's result depends only on that row's x and the
// weights, in an order fixed by the shape: the same bits for any number of rows and any residency.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/dependent_launch.cuh"

namespace cherenkov::engine::cuda::expert_layer {

constexpr int kComputeWarps = 20;
constexpr int kThreads = (kComputeWarps + 1) * 32;  // the last warp issues the copies
constexpr int kGateUpRows = 8;                      // intermediate rows per gate/up item
constexpr int kDownRows = 64;                       // output rows per down item
constexpr int kPairFragmentBytes = 4 * 12 * 8;      // one row's digits of a pair of groups: 384
constexpr int kMaxSlots = 16;

struct Shape {
    int hidden = 0;        // a multiple of 256
    int intermediate = 0;  // a multiple of 128
};

// Whether the kernel takes the shape (4-bit codes, groups of 64).
inline bool takes(int bits, int group_size, int64_t hidden, int64_t intermediate) {
    return bits == 4 && group_size == 64 && hidden % 256 == 0 && intermediate % 128 == 0 &&
           hidden >= 256 && intermediate >= 128 && hidden <= 16384 && intermediate <= 8192;
}

inline int item_bytes(const Shape& s) {
    const int gate_up = 9 * s.hidden;      // 16 rows of codes + 4 × 8 rows of parameters
    const int down = 36 * s.intermediate;  // 64 rows of codes + 2 × 64 rows of parameters
    return gate_up > down ? gate_up : down;
}

// Five teams of four warps, the same for every row count (the order of a row's sums depends on
// how a team splits an item). Each slot belongs to one team, so its uses are consumed in order, as
// its mbarrier phases require.
constexpr int kTeams = 5;
constexpr int kTeamWarps = kComputeWarps / kTeams;

// Item k of a block goes to team k % kTeams, which owns slots t, t + kTeams, … < n_slots and
// cycles through them: the items that land first are spread over all teams, and each slot's uses
// are consumed in order by one team.
struct SlotOf {
    int slot;
    int use;  // how many items used the slot before this one
};

__host__ __device__ inline SlotOf slot_of(int k, int n_slots) {
    const int team = k % kTeams, nth = k / kTeams;
    const int owned = (n_slots - team + kTeams - 1) / kTeams;
    return {team + kTeams * (nth % owned), nth / owned};
}

// A block's first items, planned once (plan_item) so that a team's loop reads its item's expert,
// row block and slot from shared memory instead of dividing by runtime counts for each one.
constexpr int kPlannedItems = 64;

// Items a block's copies may have in flight. All of them at once (9 at one row) filled the L2 and
// memory queues so deeply that every cross-block round trip of h (a gate/up item's stores, a down
// item's polls and loads) took 1-2 µs on the H200; two keep the DRAM as busy and the queues short
// (one row 596 → 575 µs a token, two rows 812 → 727, four 1283 → 1227). Fewer than kTeams, so the
// slot of item k − kItemsInFlight has not been reused when the copy warp waits for its landing.
constexpr int kItemsInFlight = 2;
static_assert(kItemsInFlight < kTeams, "the in-flight wait needs the slot's current phase");

// Shared memory, in order: 2 × kMaxSlots mbarriers, the zero block, the planned items, the tag,
// x's digits and factors, per team h's digits, factors and two buffers of warp partials, then the
// slots (128-byte aligned).
struct SmemLayout {
    int zeros, plans, tag, x_digits, x_factors, team_bytes, team0, slots, total;
    int h_digits, h_factors, partials;  // offsets inside a team's region
};

__host__ __device__ inline int align_up(int v, int a) {
    return (v + a - 1) / a * a;
}

__host__ __device__ inline SmemLayout smem_layout(const Shape& s, int rows, int n_slots,
                                                  int slot_bytes) {
    SmemLayout l{};
    l.zeros = 2 * kMaxSlots * 8;  // the fragments of lanes whose columns are unused
    l.plans = l.zeros + kPairFragmentBytes;
    l.tag = l.plans + kPlannedItems * 4;
    l.x_digits = l.tag + 16;
    l.x_factors = l.x_digits + rows * (s.hidden / 128) * kPairFragmentBytes;
    l.h_digits = 0;
    l.h_factors = rows * (s.intermediate / 128) * kPairFragmentBytes;
    l.partials = align_up(l.h_factors + rows * (s.intermediate / 64) * 8, 16);
    l.team_bytes = align_up(l.partials + 2 * kTeamWarps * rows * 16 * 4, 16);
    l.team0 = align_up(l.x_factors + rows * (s.hidden / 64) * 8, 16);
    l.slots = align_up(l.team0 + kTeams * l.team_bytes, 128);
    l.total = l.slots + n_slots * slot_bytes;
    return l;
}

struct Params {
    const ExpertAddress* table;  // [capacity]; every pointer 16-byte aligned
    const int* n_in_use;         // null: all `capacity` entries
    int capacity;
    const float* x;                // [rows, hidden]
    float* h;                      // [capacity, rows, intermediate]
    float* parts;                  // [capacity, rows, hidden]
    unsigned long long* h_tagged;  // [capacity, rows, intermediate]: h with this launch's tag
    // Blocks started by the launches before on this stream, all of gridDim.x blocks: a launch's
    // tag is that count over the grid, plus one (0 is what a cleared h holds).
    unsigned long long* blocks_started;
    Shape shape;
    int n_slots;
    int slot_bytes;
#ifdef CHERENKOV_EXPERT_LAYER_TRACE
    // dev/cuda's timeline probe (03_expert_int8_probe) passes kTraceEvents %globaltimer stamps
    // per block here: what a layer's time is spent on.
    unsigned long long* trace = nullptr;
#endif
};

#ifdef CHERENKOV_EXPERT_LAYER_TRACE
// Trace events of a block: entry, past the wait for the previous kernel, the copy warp's first
// round of copies issued, x quantized; then per item k < kTraceItems: landed, h ready (down
// items), done.
constexpr int kTraceItems = 12;
constexpr int kTraceEvents = 4 + 3 * kTraceItems;
#endif

namespace detail {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint64_t* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
}

__device__ __forceinline__ void barrier_expect(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n .reg .pred done;\n wait_%=:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra wait_%=;\n}" ::"r"(smem_address(bar)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(smem_address(dst)),
        "l"(src), "r"(bytes), "r"(smem_address(bar))
        : "memory");
}

// The threads of team `team` (named barriers 1 … kTeams; 0 is __syncthreads, 11 all the compute
// warps).
__device__ __forceinline__ void team_sync(int team) {
    asm volatile("bar.sync %0, %1;" ::"r"(team + 1), "n"(kTeamWarps * 32) : "memory");
}

// h crosses blocks as tagged words: the float's bits below, the launch's tag above, written and
// read whole (a 64-bit access is single-copy atomic). A reader that sees its launch's tag has
// the value, so neither side needs a fence: a release fence (MEMBAR.GPU) waits for the block's
// bulk copies still in flight as well, which held every gate/up item ~1.5 µs (on the H200).
__device__ __forceinline__ void store_tagged(unsigned long long* p, float v, unsigned tag) {
    const unsigned long long w = static_cast<unsigned long long>(tag) << 32 | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}

__device__ __forceinline__ ulonglong2 load_tagged2(const unsigned long long* p) {
    ulonglong2 w;
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];"
                 : "=l"(w.x), "=l"(w.y)
                 : "l"(p)
                 : "memory");
    return w;
}

// This launch's tag, from the started-block count: a block sees at most the grid − 1 other
// blocks' additions before its own, so the quotient is the same for every block of a launch.
__device__ __forceinline__ unsigned launch_tag(unsigned long long* blocks_started) {
    const unsigned long long before = atomicAdd(blocks_started, 1ULL);
    return static_cast<unsigned>(before / gridDim.x % 0xFFFFFFFFULL) + 1;
}

__device__ __forceinline__ unsigned long long load_tagged(const unsigned long long* p) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return w;
}

__device__ __forceinline__ bool tagged_with(unsigned long long w, unsigned tag) {
    return static_cast<unsigned>(w >> 32) == tag;
}

// Timeline stamps for dev/cuda's probes, which define CHERENKOV_EXPERT_LAYER_TRACE before
// including this header; the engine's build compiles none of them.
#ifdef CHERENKOV_EXPERT_LAYER_TRACE
__device__ __forceinline__ void stamp(unsigned long long* trace, int event) {
    if (trace == nullptr || event >= kTraceEvents) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[static_cast<size_t>(blockIdx.x) * kTraceEvents + event] = t;
}
#define CHERENKOV_EXPERT_LAYER_STAMP(event) stamp(p.trace, (event))
#else
#define CHERENKOV_EXPERT_LAYER_STAMP(event) \
    do {                                    \
    } while (0)
#endif

__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Quantizes one group of 64 values (lane l holds positions 2l, 2l+1) into the B fragments of its
// pair: position q of group gg (0, 1 within the pair) is window position p = 64·gg + q, which the
// consumer reads as byte (p/2) of its row's 64-byte window, nibble p % 2; digit d goes to column
// n = 3·gg + d, kept at slot 2n + (lane c of the quad & 1) of word u. Returns (2^(e−22), Σx) with
// max|x| < 2^e; a group whose largest |x| is under 2^-105 is taken as zeros.
__device__ __forceinline__ float2 quantize_group(float v0, float v1, int lane, int gg,
                                                 uint8_t* pair) {
    float m = fmaxf(fabsf(v0), fabsf(v1));
    float s = v0 + v1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFU, m, o));
        s += __shfl_xor_sync(0xFFFFFFFFU, s, o);
    }
    // m = f·2^e with f in [0.5, 1): e = biased exponent − 126 (m normal, as it is from 2^-105 up).
    const int biased = static_cast<int>(__float_as_uint(m) >> 23);
    const bool zero = biased < 22;
    const float to_int = zero ? 0.0F : __uint_as_float(static_cast<uint32_t>(275 - biased) << 23);
    const float factor = zero ? 0.0F : __uint_as_float(static_cast<uint32_t>(biased - 21) << 23);
    const int u = (lane >> 2) & 3, i = lane & 3, half = lane >> 4;
    uint8_t* at = pair + (u * 12 + 6 * gg + half) * 8 + i;
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        const int q = __float2int_rn((o == 0 ? v0 : v1) * to_int);  // |q| ≤ 2^22
        const int d0 = static_cast<int8_t>(q);
        const int r = (q - d0) >> 8;
        const int d1 = static_cast<int8_t>(r);
        const int d2 = (r - d1) >> 8;
        at[4 * o] = static_cast<uint8_t>(d0);
        at[4 * o + 16] = static_cast<uint8_t>(d1);  // slot + 2
        at[4 * o + 32] = static_cast<uint8_t>(d2);  // slot + 4
    }
    return make_float2(factor, s);
}

// What a lane needs to read fragments and parameters, worked out once per kernel: its fragment
// offset within a pair's 384 bytes (or the zero block, for lanes whose columns are unused, with a
// pair stride of 0), and PRMT selectors that move the bf16 of its columns' group into a float.
struct LaneConsts {
    int frag_offset;  // from the digits base (live) or from the zero block
    bool live;
    uint32_t sel_col0, sel_col1, sel_bias;  // byte_perm selectors: 0x1044 low half, 0x3244 high
    bool g_col0, g_col1, g_bias;
    float has_bias;
};

__device__ __forceinline__ LaneConsts lane_consts(int lane) {
    const int n = lane >> 2, c = lane & 3;
    LaneConsts k;
    k.live = n < 6 && (n / 3) == (c >> 1);
    k.frag_offset = (2 * n + (c & 1)) * 8;
    k.g_col0 = c >= 2;
    k.g_col1 = c >= 1;
    k.g_bias = c >= 2;
    k.sel_col0 = k.g_col0 ? 0x3244U : 0x1044U;
    k.sel_col1 = k.g_col1 ? 0x3244U : 0x1044U;
    k.sel_bias = k.g_bias ? 0x3244U : 0x1044U;
    k.has_bias = ((c & 1) == 0 && c < 3) ? 1.0F : 0.0F;
    return k;
}

__device__ __forceinline__ float bf16_at(uint32_t word, uint32_t selector) {
    return __uint_as_float(__byte_perm(word, 0, selector));
}

// Sums of one pair of groups for `Rows` rows into acc: w0, w1 are rows g and g + 8 of the m16 tile
// (16 bytes each: lane c's quarter of the 64-byte window), sw/bw the two rows' scale and bias
// words (groups 2m, 2m + 1), frag this lane's fragments of the pair for row 0 (row_stride bytes
// between rows; 0 for unused lanes), factors the pair's (2^(e−22), Σx) for both groups, per row.
template <int Rows>
struct PairAcc {
    float col[Rows][4] = {};  // [row][row g col 2c, row g col 2c+1, row g+8 col 2c, col 2c+1]
    float bias[Rows][2] = {};
};

template <int Rows>
__device__ __forceinline__ void multiply_pair(const uint4& w0, const uint4& w1, uint32_t sw0,
                                              uint32_t sw1, uint32_t bw0, uint32_t bw1,
                                              const uint8_t* frag, int row_stride,
                                              const float4* factors, int factor_stride,
                                              const LaneConsts& k, PairAcc<Rows>& acc) {
    const uint32_t a[4] = {w0.x, w0.y, w0.z, w0.w};
    const uint32_t b[4] = {w1.x, w1.y, w1.z, w1.w};
    const float s0_col0 = bf16_at(sw0, k.sel_col0), s0_col1 = bf16_at(sw0, k.sel_col1);
    const float s1_col0 = bf16_at(sw1, k.sel_col0), s1_col1 = bf16_at(sw1, k.sel_col1);
    const float bias0 = bf16_at(bw0, k.sel_bias), bias1 = bf16_at(bw1, k.sel_bias);
#pragma unroll
    for (int t = 0; t < Rows; ++t) {
        int d[4] = {0, 0, 0, 0};
        const uint8_t* f_t = frag + t * row_stride;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const uint2 bf = *reinterpret_cast<const uint2*>(f_t + u * 96);
            mma_u8s8(d, a[u] & 0x0F0F0F0FU, b[u] & 0x0F0F0F0FU, (a[u] >> 4) & 0x0F0F0F0FU,
                     (b[u] >> 4) & 0x0F0F0F0FU, bf.x, bf.y);
        }
        const float4 f = factors[t * factor_stride];  // (xs0, Σx0, xs1, Σx1)
        const float xs_col0 = k.g_col0 ? f.z : f.x, xs_col1 = k.g_col1 ? f.z : f.x;
        const float sx = (k.g_bias ? f.w : f.y) * k.has_bias;
        acc.col[t][0] = fmaf(s0_col0 * xs_col0, static_cast<float>(d[0]), acc.col[t][0]);
        acc.col[t][1] = fmaf(s0_col1 * xs_col1, static_cast<float>(d[1]), acc.col[t][1]);
        acc.col[t][2] = fmaf(s1_col0 * xs_col0, static_cast<float>(d[2]), acc.col[t][2]);
        acc.col[t][3] = fmaf(s1_col1 * xs_col1, static_cast<float>(d[3]), acc.col[t][3]);
        acc.bias[t][0] = fmaf(bias0, sx, acc.bias[t][0]);
        acc.bias[t][1] = fmaf(bias1, sx, acc.bias[t][1]);
    }
}

// Row g (h = 0) or g + 8 (h = 1) of row t, summed over the quad in a fixed order (every lane).
template <int Rows>
__device__ __forceinline__ float pair_total(const PairAcc<Rows>& acc, int t, int h, int c) {
    const float w0 = c == 0 ? 1.0F : c == 1 ? 65536.0F : c == 2 ? 256.0F : 0.0F;
    const float w1 = c == 0 ? 256.0F : c == 1 ? 1.0F : c == 2 ? 65536.0F : 0.0F;
    float v = fmaf(acc.col[t][2 * h], w0, fmaf(acc.col[t][2 * h + 1], w1, acc.bias[t][h]));
    v += __shfl_xor_sync(0xFFFFFFFFU, v, 1);
    v += __shfl_xor_sync(0xFFFFFFFFU, v, 2);
    return v;
}

struct Item {
    bool gate_up;
    int expert;
    int block;  // row block: kGateUpRows or kDownRows rows
};

__device__ __forceinline__ Item item_at(int i, int n, const Shape& s) {
    const int gate_up_per = s.intermediate / kGateUpRows;
    const int down_per = s.hidden / kDownRows;
    if (i < n * gate_up_per) return {true, i / gate_up_per, i % gate_up_per};
    i -= n * gate_up_per;
    return {false, i / down_per, i % down_per};
}

// Item k of block `first` (of `grid`) and the slot it lands in, packed into a word: gate/up (bit
// 31), expert (bits 15-30), row block (bits 5-14), slot (bits 1-4) and the slot's phase (bit 0).
struct PlannedItem {
    Item item;
    int slot;
    uint32_t phase;
};

__device__ __forceinline__ PlannedItem plan_item(int k, int first, int grid, int n, const Shape& s,
                                                 int n_slots) {
    const SlotOf at = slot_of(k, n_slots);
    return {item_at(first + k * grid, n, s), at.slot, static_cast<uint32_t>(at.use & 1)};
}

__device__ __forceinline__ uint32_t pack_plan(const PlannedItem& q) {
    return (q.item.gate_up ? 1U << 31 : 0U) | static_cast<uint32_t>(q.item.expert) << 15 |
           static_cast<uint32_t>(q.item.block) << 5 | static_cast<uint32_t>(q.slot) << 1 | q.phase;
}

__device__ __forceinline__ PlannedItem unpack_plan(uint32_t w) {
    return {{(w >> 31) != 0, static_cast<int>((w >> 15) & 0xFFFFU),
             static_cast<int>((w >> 5) & 0x3FFU)},
            static_cast<int>((w >> 1) & 0xFU),
            w & 1U};
}

// The global addresses of one item's pieces (gate/up: gate and up codes, gate scales and biases,
// up scales and biases; down: codes[0], params[0] and params[1]).
struct ItemSource {
    const uint8_t* codes[2];
    const uint16_t* params[4];
};

template <typename T>
__device__ __forceinline__ const T* shfl_pointer(const T* p, int src) {
    const auto v = reinterpret_cast<uintptr_t>(p);
    const auto lo = __shfl_sync(0xFFFFFFFFU, static_cast<uint32_t>(v), src);
    const auto hi = __shfl_sync(0xFFFFFFFFU, static_cast<uint32_t>(v >> 32), src);
    return reinterpret_cast<const T*>((static_cast<uint64_t>(hi) << 32) | lo);
}

__device__ __forceinline__ void issue_item(const Item& it, const ItemSource& src, const Shape& s,
                                           uint8_t* slot, uint64_t* full) {
    if (it.gate_up) {
        const int codes = kGateUpRows * s.hidden / 2;  // 8 rows
        const int params = kGateUpRows * (s.hidden / 64) * 2;
        barrier_expect(full, static_cast<uint32_t>(2 * codes + 4 * params));
        const size_t c0 = static_cast<size_t>(it.block) * codes;
        const size_t p0 = static_cast<size_t>(it.block) * (params / 2);  // elements
        bulk_copy(slot, src.codes[0] + c0, codes, full);
        bulk_copy(slot + codes, src.codes[1] + c0, codes, full);
        for (int q = 0; q < 4; ++q) {
            bulk_copy(slot + 2 * codes + q * params, src.params[q] + p0, params, full);
        }
    } else {
        const int codes = kDownRows * s.intermediate / 2;
        const int params = kDownRows * (s.intermediate / 64) * 2;
        barrier_expect(full, static_cast<uint32_t>(codes + 2 * params));
        const size_t c0 = static_cast<size_t>(it.block) * codes;
        const size_t p0 = static_cast<size_t>(it.block) * (params / 2);
        bulk_copy(slot, src.codes[0] + c0, codes, full);
        bulk_copy(slot + codes, src.params[0] + p0, params, full);
        bulk_copy(slot + codes + params, src.params[1] + p0, params, full);
    }
}

}  // namespace detail

template <int Rows>
__global__ void __launch_bounds__(kThreads, 1) experts_layer_kernel(Params p) {
#if __CUDA_ARCH__ >= 900  // bulk copies and mbarrier waits; the host launches it on sm_90 only
    using namespace detail;
    extern __shared__ __align__(128) uint8_t smem[];
    const Shape s = p.shape;
    const SmemLayout L = smem_layout(s, Rows, p.n_slots, p.slot_bytes);
    auto* full = reinterpret_cast<uint64_t*>(smem);
    uint64_t* empty = full + kMaxSlots;
    const int warp_id = static_cast<int>(threadIdx.x / 32),
              lane = static_cast<int>(threadIdx.x % 32);
    auto* tag_slot = reinterpret_cast<unsigned*>(smem + L.tag);
    if (threadIdx.x == 0) {
        CHERENKOV_EXPERT_LAYER_STAMP(0);
        // Before this block lets the next launch start (allow_next_kernel), so that no block of
        // a later launch has added to the count when this one reads it.
        *tag_slot = launch_tag(p.blocks_started);
        for (int i = 0; i < p.n_slots; ++i) {
            barrier_init(&full[i]);
            barrier_init(&empty[i]);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    wait_for_previous_kernel();  // the table, its count and x come from earlier kernels
    allow_next_kernel();
    if (threadIdx.x == 0) CHERENKOV_EXPERT_LAYER_STAMP(1);

    const int n = p.n_in_use != nullptr ? min(*p.n_in_use, p.capacity) : p.capacity;
    const int gate_up_per = s.intermediate / kGateUpRows;
    const int down_per = s.hidden / kDownRows;
    const int n_items = n * (gate_up_per + down_per);
    const int grid = static_cast<int>(gridDim.x), first = static_cast<int>(blockIdx.x);
    const int mine = first < n_items ? (n_items - first + grid - 1) / grid : 0;
    uint8_t* slots = smem + L.slots;

    if (warp_id == kComputeWarps) {  // the copy warp
        // Lane l reads the table entry of item base + l, so a block's table reads go out together;
        // lane 0 then issues the items in order (each slot's uses wait for the one before).
        for (int base = 0; base < mine; base += 32) {
            const int k = base + lane;
            const PlannedItem lane_plan = plan_item(min(k, mine - 1), first, grid, n, s, p.n_slots);
            const uint32_t lane_word = pack_plan(lane_plan);
            const Item& mine_item = lane_plan.item;
            const ExpertAddress& ex = p.table[mine_item.expert];
            const uint8_t* codes0 = mine_item.gate_up ? ex.gate_codes : ex.down_codes;
            const uint8_t* codes1 = ex.up_codes;
            const uint16_t* params[4] = {mine_item.gate_up ? ex.gate_scales : ex.down_scales,
                                         mine_item.gate_up ? ex.gate_biases : ex.down_biases,
                                         ex.up_scales, ex.up_biases};
            const int count = min(32, mine - base);
            for (int j = 0; j < count; ++j) {
                ItemSource src;
                src.codes[0] = shfl_pointer(codes0, j);
                src.codes[1] = shfl_pointer(codes1, j);
                for (int q = 0; q < 4; ++q) src.params[q] = shfl_pointer(params[q], j);
                const PlannedItem at = unpack_plan(__shfl_sync(0xFFFFFFFFU, lane_word, j));
                if (lane == 0) {
                    const int kk = base + j;
                    const int slot = at.slot;
                    if (kk >= kItemsInFlight) {  // wait for item kk − kItemsInFlight to land
                        const SlotOf before = slot_of(kk - kItemsInFlight, p.n_slots);
                        barrier_wait(&full[before.slot], static_cast<uint32_t>(before.use & 1));
                    }
                    if (kk >= p.n_slots) {  // not the slot's first use: wait for its last one
                        barrier_wait(&empty[slot], at.phase ^ 1U);
                        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    }
                    issue_item(at.item, src, s, slots + static_cast<size_t>(slot) * p.slot_bytes,
                               &full[slot]);
                    if (kk == min(mine, p.n_slots) - 1) CHERENKOV_EXPERT_LAYER_STAMP(2);
                }
                __syncwarp();
            }
        }
        return;
    }

    const int team = warp_id / kTeamWarps, warp = warp_id % kTeamWarps;
    const int tid = warp * 32 + lane;       // within the team
    const int g = lane >> 2, c = lane & 3;  // the mma's group (row, column) and quad lane
    const int hidden_pairs = s.hidden / 128, inter_pairs = s.intermediate / 128;
    const int hidden_groups = s.hidden / 64, inter_groups = s.intermediate / 64;

    // x's digits, shared by every gate/up item of the block, and the zero block.
    if (warp_id == 0) {
        reinterpret_cast<uint4*>(smem + L.zeros)[lane % (kPairFragmentBytes / 16)] =
            make_uint4(0, 0, 0, 0);
    }
    for (int q = warp_id; q < Rows * hidden_groups; q += kComputeWarps) {
        const int t = q / hidden_groups, j = q % hidden_groups;
        const float2 v =
            reinterpret_cast<const float2*>(p.x + static_cast<size_t>(t) * s.hidden + 64 * j)[lane];
        uint8_t* pair = smem + L.x_digits + (t * hidden_pairs + j / 2) * kPairFragmentBytes;
        const float2 f = quantize_group(v.x, v.y, lane, j & 1, pair);
        if (lane == 0) reinterpret_cast<float2*>(smem + L.x_factors)[t * hidden_groups + j] = f;
    }
    auto* plans = reinterpret_cast<uint32_t*>(smem + L.plans);
    for (int k = static_cast<int>(threadIdx.x); k < min(mine, kPlannedItems);
         k += kComputeWarps * 32) {
        plans[k] = pack_plan(plan_item(k, first, grid, n, s, p.n_slots));
    }
    // The compute warps only (named barrier 11): the copy warp may be waiting for a slot.
    asm volatile("bar.sync 11, %0;" ::"n"(kComputeWarps * 32) : "memory");
    if (threadIdx.x == 0) CHERENKOV_EXPERT_LAYER_STAMP(3);
    const unsigned tag = *tag_slot;  // written before the __syncthreads above

    const LaneConsts lk = lane_consts(lane);
    // This lane's fragments: pair m of row t at frag + m·pair_stride + t·row_stride.
    const auto lane_frags = [&](const uint8_t* digits, int pairs, int& pair_stride,
                                int& row_stride) {
        pair_stride = lk.live ? kPairFragmentBytes : 0;
        row_stride = lk.live ? pairs * kPairFragmentBytes : 0;
        return lk.live ? digits + lk.frag_offset : smem + L.zeros;
    };
    int x_pair_stride, x_row_stride;
    const uint8_t* x_frag =
        lane_frags(smem + L.x_digits, hidden_pairs, x_pair_stride, x_row_stride);
    const auto* x_factors = reinterpret_cast<const float4*>(smem + L.x_factors);
    uint8_t* team_smem = smem + L.team0 + team * L.team_bytes;
    uint8_t* h_digits = team_smem + L.h_digits;
    auto* h_factors = reinterpret_cast<float2*>(team_smem + L.h_factors);
    int h_pair_stride, h_row_stride;
    const uint8_t* h_frag = lane_frags(h_digits, inter_pairs, h_pair_stride, h_row_stride);
    // The warp's share of a gate/up item's pairs (balanced, contiguous).
    const int gu_begin = warp * hidden_pairs / kTeamWarps;
    const int gu_end = (warp + 1) * hidden_pairs / kTeamWarps;

    // The team's items, in order.
    {
        int step = 0;
        for (int k = team; k < mine; k += kTeams) {
            ++step;
            const PlannedItem plan = k < kPlannedItems ? unpack_plan(plans[k])
                                                       : plan_item(k, first, grid, n, s, p.n_slots);
            const int slot = plan.slot;
            const uint8_t* item = slots + static_cast<size_t>(slot) * p.slot_bytes;
            const Item it = plan.item;
            const uint32_t phase = plan.phase;
            if (it.gate_up) {
                float* partials = reinterpret_cast<float*>(team_smem + L.partials) +
                                  (step & 1) * kTeamWarps * Rows * 16;
                barrier_wait(&full[slot], phase);
                if (tid == 0) CHERENKOV_EXPERT_LAYER_STAMP(4 + 3 * k);
                const int row_bytes = s.hidden / 2;
                const int codes = kGateUpRows * row_bytes;
                const int params = kGateUpRows * hidden_groups * 2;
                const uint8_t* gate_row = item + g * row_bytes + 16 * c;
                const uint8_t* up_row = gate_row + codes;
                const uint8_t* gs = item + 2 * codes + g * hidden_groups * 2;
                PairAcc<Rows> acc;
                for (int m = gu_begin; m < gu_end; ++m) {
                    const uint4 wg = *reinterpret_cast<const uint4*>(gate_row + 64 * m);
                    const uint4 wu = *reinterpret_cast<const uint4*>(up_row + 64 * m);
                    const uint32_t sg = *reinterpret_cast<const uint32_t*>(gs + 4 * m);
                    const uint32_t bg = *reinterpret_cast<const uint32_t*>(gs + params + 4 * m);
                    const uint32_t su = *reinterpret_cast<const uint32_t*>(gs + 2 * params + 4 * m);
                    const uint32_t bu = *reinterpret_cast<const uint32_t*>(gs + 3 * params + 4 * m);
                    multiply_pair<Rows>(wg, wu, sg, su, bg, bu, x_frag + m * x_pair_stride,
                                        x_row_stride, x_factors + m, hidden_pairs, lk, acc);
                }
#pragma unroll
                for (int t = 0; t < Rows; ++t) {
                    const float gate = pair_total(acc, t, 0, c), up = pair_total(acc, t, 1, c);
                    if (c == 0) {
                        partials[(warp * Rows + t) * 16 + g] = gate;
                        partials[(warp * Rows + t) * 16 + 8 + g] = up;
                    }
                }
                team_sync(team);
                if (warp == 0) {
                    // Lane 8t + r sums row r of row t and publishes it, tagged.
                    const int t = min(lane >> 3, Rows - 1), r = lane & 7;
                    float gate = 0.0F, up = 0.0F;
#pragma unroll
                    for (int w = 0; w < kTeamWarps; ++w) {
                        gate += partials[(w * Rows + t) * 16 + r];
                        up += partials[(w * Rows + t) * 16 + 8 + r];
                    }
                    const float hv = gate / (1.0F + expf(-gate)) * up;
                    if (lane < 8 * Rows) {
                        const size_t at =
                            (static_cast<size_t>(it.expert) * Rows + t) * s.intermediate +
                            it.block * kGateUpRows + r;
                        store_tagged(p.h_tagged + at, hv, tag);
                        p.h[at] = hv;  // the caller's copy, read after the launch
                    }
                    if (lane == 0) {
                        barrier_arrive(&empty[slot]);
                        CHERENKOV_EXPERT_LAYER_STAMP(6 + 3 * k);
                    }
                }
            } else {
                // h[e] is [Rows, intermediate]: group q of all rows is at 64·q. The team's first
                // warp waits until the first word of every gate/up item's row 0 carries this
                // launch's tag (polling all of h from every waiting team held them 2-4 µs more:
                // ~4 MB of L2 reads a round beside the copies).
                const unsigned long long* h_e =
                    p.h_tagged + static_cast<size_t>(it.expert) * Rows * s.intermediate;
                if (warp == 0) {
                    for (bool all = false; !all;) {
                        bool mine_there = true;
#pragma unroll 4
                        for (int b = lane; b < gate_up_per; b += 32) {
                            mine_there =
                                tagged_with(load_tagged(h_e + b * kGateUpRows), tag) && mine_there;
                        }
                        all = __all_sync(0xFFFFFFFFU, mine_there);
                    }
                }
                team_sync(team);
                // Then all of h, loads first, so the warp waits for L2 once per four groups; a
                // word still without the tag is read again.
                for (int q0 = warp; q0 < Rows * inter_groups; q0 += 4 * kTeamWarps) {
                    ulonglong2 v[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int q = q0 + i * kTeamWarps;
                        v[i] = q < Rows * inter_groups ? load_tagged2(h_e + 64 * q + 2 * lane)
                                                       : make_ulonglong2(0, 0);
                    }
                    // Words not yet written are read again together: one L2 round trip a retry.
                    for (;;) {
                        bool missing[4], any = false;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int q = q0 + i * kTeamWarps;
                            missing[i] = q < Rows * inter_groups &&
                                         (!tagged_with(v[i].x, tag) || !tagged_with(v[i].y, tag));
                            any = any || missing[i];
                        }
                        if (!any) break;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int q = q0 + i * kTeamWarps;
                            if (missing[i]) v[i] = load_tagged2(h_e + 64 * q + 2 * lane);
                        }
                    }
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int q = q0 + i * kTeamWarps;
                        if (q >= Rows * inter_groups) break;
                        const int t = q / inter_groups, j = q % inter_groups;
                        uint8_t* pair = h_digits + (t * inter_pairs + j / 2) * kPairFragmentBytes;
                        const float2 f = quantize_group(
                            __uint_as_float(static_cast<unsigned>(v[i].x)),
                            __uint_as_float(static_cast<unsigned>(v[i].y)), lane, j & 1, pair);
                        if (lane == 0) h_factors[t * inter_groups + j] = f;
                    }
                }
                if (tid == 0) CHERENKOV_EXPERT_LAYER_STAMP(5 + 3 * k);
                barrier_wait(&full[slot], phase);
                if (tid == 0) CHERENKOV_EXPERT_LAYER_STAMP(4 + 3 * k);
                team_sync(team);
                const int row_bytes = s.intermediate / 2;
                const int codes = kDownRows * row_bytes;
                const int params = kDownRows * inter_groups * 2;
                // Each warp owns whole 16-row tiles, so a row's sum never leaves its warp.
                for (int tile = warp; tile < kDownRows / 16; tile += kTeamWarps) {
                    const int r0 = tile * 16 + g, r1 = r0 + 8;
                    const uint8_t* row0 = item + r0 * row_bytes + 16 * c;
                    const uint8_t* row1 = item + r1 * row_bytes + 16 * c;
                    const uint8_t* sc0 = item + codes + r0 * inter_groups * 2;
                    const uint8_t* sc1 = item + codes + r1 * inter_groups * 2;
                    PairAcc<Rows> acc;
                    for (int m = 0; m < inter_pairs; ++m) {
                        const uint4 w0 = *reinterpret_cast<const uint4*>(row0 + 64 * m);
                        const uint4 w1 = *reinterpret_cast<const uint4*>(row1 + 64 * m);
                        const uint32_t s0 = *reinterpret_cast<const uint32_t*>(sc0 + 4 * m);
                        const uint32_t s1 = *reinterpret_cast<const uint32_t*>(sc1 + 4 * m);
                        const uint32_t b0 =
                            *reinterpret_cast<const uint32_t*>(sc0 + params + 4 * m);
                        const uint32_t b1 =
                            *reinterpret_cast<const uint32_t*>(sc1 + params + 4 * m);
                        multiply_pair<Rows>(
                            w0, w1, s0, s1, b0, b1, h_frag + m * h_pair_stride, h_row_stride,
                            reinterpret_cast<const float4*>(h_factors) + m, inter_pairs, lk, acc);
                    }
#pragma unroll
                    for (int t = 0; t < Rows; ++t) {
                        const float v0 = pair_total(acc, t, 0, c), v1 = pair_total(acc, t, 1, c);
                        if (c == 0) {
                            float* out = p.parts +
                                         (static_cast<size_t>(it.expert) * Rows + t) * s.hidden +
                                         it.block * kDownRows;
                            out[r0] = v0;
                            out[r1] = v1;
                        }
                    }
                }
                team_sync(team);  // the slot and h's digits are free again
                if (tid == 0) {
                    barrier_arrive(&empty[slot]);
                    CHERENKOV_EXPERT_LAYER_STAMP(6 + 3 * k);
                }
            }
        }
    }
#endif
}

// Slots for a device: as many as fit beside the fixed regions, at most kMaxSlots.
inline int slots_that_fit(const Shape& s, int rows, int max_dynamic_smem) {
    const int bytes = item_bytes(s);
    const SmemLayout none = smem_layout(s, rows, 0, bytes);
    const int n = (max_dynamic_smem - none.total) / bytes;
    return n < kMaxSlots ? n : kMaxSlots;
}

}  // namespace cherenkov::engine::cuda::expert_layer
