// Variants of the routed-expert decode GEMV (affine_experts_variants.h). The Current kernels
// (affine_gemv.cu) launch one short block per 8-32 output rows: at 10 experts of [640, 2560] a
// block does 2-3 pieces per lane, so every block pays the table, x-copy and DRAM latencies once
// and the grid runs in 1.5 waves (950 GB/s on an H200 against a 4.46 TB/s read ceiling). The
// variants here are persistent instead:
//   * grid = resident blocks (occupancy × SMs); each warp walks a fixed list of "units" (warp-sized
//     tiles of output rows of one expert: unit, unit + n_warps, …), so each warp streams for the
//     whole launch and the latency is paid once per warp, not once per 8 rows;
//   * a lane's loads run D pieces ahead across unit boundaries (a ring of D stages), so a lane
//     keeps D × 4 rows × 4·Bits bytes in flight (A at Q4, 1 row: 256 B; ~100 KB per SM);
//   * sub-warps of L lanes per row with L dividing the pieces (gate/up 2560 = 80 pieces: 16 × 5
//     in A, 8 × 10 in B; down 640 = 20 pieces: 4 × 5), so no lane idles as with 32 × 2.5;
//   * gate and up rows share one read of x (kept in shared memory, copied once per block while
//     the first weight loads are in flight); down reads h through L1 (or L2 in C);
//   * C runs gate/up and down in one launch: a warp's down units wait (spinning on a per-expert
//     counter) until all gate/up units of their expert are stored; the last block resets the
//     counters. Every block is resident (grid ≤ occupancy), and every warp finishes its gate/up
//     units before its first down unit, so the wait always ends.
// The arithmetic per piece is the Current kernel's (code → float by the exponent trick, qdot
// identity, xor butterfly over the L lanes), so each output is summed in an order fixed by the
// shape, whatever warp computes it: bitwise reproducible.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/cuda/affine_experts_variants.h"
#include "engine/cuda/cuda_check.cuh"

namespace cherenkov::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kRowsPerLane = 4;  // gate/up: 2 rows of gate + the same 2 rows of up
constexpr int kPieceCols = 32;
constexpr int kMaxExperts = 64;  // C's counters
constexpr size_t kMaxSharedXBytes = size_t{48} << 10;

enum class Mode { GateUp, Down };

// C's counters: gate/up units stored per expert, and blocks finished (the last one resets all).
__device__ unsigned g_gate_up_done[kMaxExperts];
__device__ unsigned g_blocks_done;

struct Phase {
    int rows;              // output rows per expert
    int n_pieces;          // cols / 32
    int group_shift;       // log2(group_size / 32)
    int lanes;             // L: lanes per output row
    int steps;             // P = ceil(n_pieces / L): pieces per lane per row
    int units_per_expert;  // ceil(rows / rows per warp)
    int n_units;           // units_per_expert · n_experts
    const float* x;        // [n_rows, x_stride] (+ e·x_expert_stride for Down)
    size_t x_stride;
    size_t x_expert_stride;
    float* y;  // [n_rows, y_stride] + e·y_expert_stride
    size_t y_stride;
    size_t y_expert_stride;
};

struct Params {
    const ExpertAddress* table;
    Phase gate_up;
    Phase down;
};

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ float exp2_int(int n) {
    return __uint_as_float(static_cast<uint32_t>(127 + n) << 23);
}

template <typename T>
__device__ __forceinline__ T* load_pointer(T* const* p) {
    return reinterpret_cast<T*>(__ldg(reinterpret_cast<const unsigned long long*>(p)));
}

// As affine_gemv.cu: the 32 codes of a piece as Bits words, evict-first.
template <int Bits>
__device__ __forceinline__ void load_piece(const uint8_t* p, uint32_t (&w)[Bits]) {
    if constexpr (Bits == 2) {
        const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
        w[0] = v.x;
        w[1] = v.y;
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

// As affine_gemv.cu (Bits 2, 4, 8): code i of a piece as an exact float.
template <int Bits>
__device__ __forceinline__ float code_at(const uint32_t (&w)[Bits], int i) {
    constexpr int kPerWindow = (23 - Bits) / Bits + 1;
    constexpr uint32_t kMask = (1U << Bits) - 1;
    const int bit = i * Bits;
    const int in_word = bit % 32;
    const int start = in_word / (kPerWindow * Bits) * (kPerWindow * Bits);
    const uint32_t window = w[bit / 32] >> start;
    const int p = in_word - start;
    const float f = __uint_as_float(0x4B000000U | (window & (kMask << p)));
    return fmaf(f, exp2_int(-p), -exp2_int(23 - p));
}

// x in device memory: h of one expert. kL1: through the non-coherent cache (written by an earlier
// launch); otherwise through L2 only (C writes h in the same launch).
template <bool kL1>
struct GlobalX {
    const float* x;
    size_t stride;
    __device__ __forceinline__ float4 at(int t, int piece, int f) const {
        const auto* p = reinterpret_cast<const float4*>(x + t * stride +
                                                        static_cast<size_t>(piece) * kPieceCols) +
                        f;
        if constexpr (kL1) {
            return __ldg(p);
        } else {
            return __ldcg(p);
        }
    }
};

// x in shared memory, float4 f of piece p at slot f ^ (p & 7) (as affine_gemv.cu).
struct SharedX {
    const float4* xs;
    int row_f4;
    __device__ __forceinline__ float4 at(int t, int piece, int f) const {
        return xs[t * row_f4 + piece * 8 + (f ^ (piece & 7))];
    }
};

template <int Bits>
struct Stage {
    uint32_t codes[kRowsPerLane][Bits];
    uint16_t scale[kRowsPerLane];
    uint16_t bias[kRowsPerLane];
};

// total[w][t] += scale·Σ q·x + bias·Σ x over one piece (affine_gemv.cu's piece_dot).
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

__device__ __forceinline__ float silu(float v) {
    return v / (1.0F + expf(-v));
}

template <Mode M>
constexpr int kOutRows = M == Mode::GateUp ? kRowsPerLane / 2 : kRowsPerLane;

// Where step s of this warp lies: unit k = s / P of the warp's list, piece index s − k·P.
struct Step {
    int unit;
    int index;  // 0..P−1
};

__device__ __forceinline__ Step step_at(const Phase& p, int s, int warp_id, int n_warps) {
    const int k = s / p.steps;
    return Step{warp_id + k * n_warps, s - k * p.steps};
}

// Loads step s (no-op past the warp's last step or past the row's last piece).
template <int Bits, Mode M>
__device__ __forceinline__ void load_step(Stage<Bits>& st, const Params& params, const Phase& p,
                                          int s, int n_steps, int warp_id, int n_warps, int sub,
                                          int sub_lane) {
    if (s >= n_steps) return;
    const Step at = step_at(p, s, warp_id, n_warps);
    const int piece = sub_lane + at.index * p.lanes;
    if (piece >= p.n_pieces) return;
    const int e = at.unit / p.units_per_expert;
    const int tile = at.unit - e * p.units_per_expert;
    const int row0 = (tile * (32 / p.lanes) + sub) * kOutRows<M>;
    const ExpertAddress& a = params.table[e];
    const size_t row_bytes = static_cast<size_t>(p.n_pieces) * 4 * Bits;
    const size_t row_groups = static_cast<size_t>(p.n_pieces >> p.group_shift);
    const int group = piece >> p.group_shift;
    const uint8_t* codes[2];
    const uint16_t* scales[2];
    const uint16_t* biases[2];
    if constexpr (M == Mode::GateUp) {
        codes[0] = load_pointer(&a.gate_codes);
        scales[0] = load_pointer(&a.gate_scales);
        biases[0] = load_pointer(&a.gate_biases);
        codes[1] = load_pointer(&a.up_codes);
        scales[1] = load_pointer(&a.up_scales);
        biases[1] = load_pointer(&a.up_biases);
    } else {
        codes[0] = codes[1] = load_pointer(&a.down_codes);
        scales[0] = scales[1] = load_pointer(&a.down_scales);
        biases[0] = biases[1] = load_pointer(&a.down_biases);
    }
#pragma unroll
    for (int w = 0; w < kRowsPerLane; ++w) {
        const int m = w / kOutRows<M>;  // GateUp: 0 gate, 1 up; Down: 0
        // Rows past the end read the last row (valid memory); their sums are never stored.
        const auto row = static_cast<size_t>(min(row0 + w % kOutRows<M>, p.rows - 1));
        load_piece<Bits>(codes[m] + row * row_bytes + piece * (4 * Bits), st.codes[w]);
        st.scale[w] = __ldg(scales[m] + row * row_groups + group);
        st.bias[w] = __ldg(biases[m] + row * row_groups + group);
    }
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Copies x [R, n_pieces·32] into shared memory, swizzled for SharedX, and syncs the block.
template <int R>
__device__ __forceinline__ void copy_x(float4* xs, const Phase& p) {
    const int row_f4 = p.n_pieces * 8;
    for (int f = static_cast<int>(threadIdx.x); f < R * row_f4; f += kThreads) {
        const int t = f / row_f4;
        const int c4 = f - t * row_f4;
        const int piece = c4 >> 3;
        xs[t * row_f4 + piece * 8 + ((c4 & 7) ^ (piece & 7))] =
            reinterpret_cast<const float4*>(p.x + t * p.x_stride)[c4];
    }
    __syncthreads();
}

// One phase for this warp: its units warp_id, warp_id + n_warps, … in order, D pieces in flight.
// Every thread of the block calls it (GateUp syncs the block after the copy of x).
// kFused: GateUp counts finished units per expert; Down waits for them and reads h through L2.
template <int Bits, int R, int D, Mode M, bool kFused>
__device__ __forceinline__ void run_phase(const Params& params, const Phase& p, float4* xs) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp_id =
        static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
    const int n_warps = static_cast<int>(gridDim.x) * kWarpsPerBlock;
    const int sub = lane / p.lanes;
    const int sub_lane = lane % p.lanes;
    const int my_units = warp_id < p.n_units ? (p.n_units - 1 - warp_id) / n_warps + 1 : 0;
    const int n_steps = my_units * p.steps;

    Stage<Bits> stage[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
        load_step<Bits, M>(stage[d], params, p, d, n_steps, warp_id, n_warps, sub, sub_lane);
    }
    if constexpr (M == Mode::GateUp) copy_x<R>(xs, p);  // overlaps the first loads

    float total[kRowsPerLane][R];
    for (int base = 0; base < n_steps; base += D) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
            const int s = base + d;
            if (s >= n_steps) break;  // warp-uniform
            const Step at = step_at(p, s, warp_id, n_warps);
            const int e = at.unit / p.units_per_expert;
            if (at.index == 0) {
#pragma unroll
                for (int w = 0; w < kRowsPerLane; ++w) {
#pragma unroll
                    for (int t = 0; t < R; ++t) total[w][t] = 0.0F;
                }
                if constexpr (kFused && M == Mode::Down) {
                    if (lane == 0) {
                        const auto need = static_cast<unsigned>(params.gate_up.units_per_expert);
                        while (load_acquire(&g_gate_up_done[e]) < need) __nanosleep(64);
                    }
                    __syncwarp();
                }
            }
            const int piece = sub_lane + at.index * p.lanes;
            if (piece < p.n_pieces) {
                if constexpr (M == Mode::GateUp) {
                    piece_dot<Bits, R>(stage[d], SharedX{xs, p.n_pieces * 8}, piece, total);
                } else {
                    const GlobalX<!kFused> x{p.x + e * p.x_expert_stride, p.x_stride};
                    piece_dot<Bits, R>(stage[d], x, piece, total);
                }
            }
            load_step<Bits, M>(stage[d], params, p, s + D, n_steps, warp_id, n_warps, sub,
                               sub_lane);
            if (at.index != p.steps - 1) continue;

            // Unit done: butterfly over the sub-warp, then lane j stores output j.
            for (int offset = p.lanes / 2; offset > 0; offset /= 2) {
#pragma unroll
                for (int w = 0; w < kRowsPerLane; ++w) {
#pragma unroll
                    for (int t = 0; t < R; ++t) {
                        total[w][t] += __shfl_xor_sync(0xFFFFFFFFU, total[w][t], offset);
                    }
                }
            }
            const int tile = at.unit - e * p.units_per_expert;
            const int row0 = (tile * (32 / p.lanes) + sub) * kOutRows<M>;
            float* y = p.y + e * p.y_expert_stride;
#pragma unroll
            for (int out = 0; out < kOutRows<M>; ++out) {
#pragma unroll
                for (int t = 0; t < R; ++t) {
                    if (sub_lane != (out * R + t) % p.lanes || row0 + out >= p.rows) continue;
                    float value;
                    if constexpr (M == Mode::GateUp) {
                        value = silu(total[out][t]) * total[out + kOutRows<M>][t];
                    } else {
                        value = total[out][t];
                    }
                    y[t * p.y_stride + row0 + out] = value;
                }
            }
            if constexpr (kFused && M == Mode::GateUp) {
                __syncwarp();  // the warp's stores before lane 0's release
                if (lane == 0) {
                    __threadfence();
                    atomicAdd(&g_gate_up_done[e], 1U);
                }
            }
        }
    }
}

// A and B: one phase per launch.
template <int Bits, int R, int D, Mode M>
__global__ void __launch_bounds__(kThreads) persistent_kernel(const Params params) {
    extern __shared__ float4 x_shared[];
    run_phase<Bits, R, D, M, false>(params, M == Mode::GateUp ? params.gate_up : params.down,
                                    x_shared);
}

// C: both phases in one launch; the last block to finish resets the counters for the next call.
template <int Bits, int R, int D>
__global__ void __launch_bounds__(kThreads) fused_kernel(const Params params) {
    extern __shared__ float4 x_shared[];
    run_phase<Bits, R, D, Mode::GateUp, true>(params, params.gate_up, x_shared);
    run_phase<Bits, R, D, Mode::Down, true>(params, params.down, x_shared);
    __syncthreads();
    if (threadIdx.x != 0) return;
    __threadfence();
    if (atomicAdd(&g_blocks_done, 1U) != gridDim.x - 1) return;
    const int n_experts = params.gate_up.n_units / params.gate_up.units_per_expert;
    for (int e = 0; e < n_experts; ++e) g_gate_up_done[e] = 0;
    g_blocks_done = 0;
    __threadfence();
}

// y[t][d] = (accumulate ? y[t][d] : 0) + Σ_e weights[e][t]·part[e][t][d] (affine_gemv.cu's).
__global__ void combine_kernel(const float* part, const float* weights, int n_experts, int n_rows,
                               int hidden, float* y, bool accumulate) {
    const int index = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (index >= n_rows * hidden) return;
    const int t = index / hidden;
    float sum = accumulate ? y[index] : 0.0F;
    for (int e = 0; e < n_experts; ++e) {
        const float w = weights[e * n_rows + t];
        if (w != 0.0F) sum = fmaf(w, part[static_cast<size_t>(e) * n_rows * hidden + index], sum);
    }
    y[index] = sum;
}

// Per variant: lanes per row (gate/up, down) and pieces in flight per lane.
struct Config {
    int gate_up_lanes;
    int down_lanes;
    bool fused;
};

Config config_for(ExpertKernel kernel) {
    switch (kernel) {
        case ExpertKernel::B: return Config{8, 4, false};
        case ExpertKernel::C: return Config{16, 4, true};
        default: return Config{16, 4, false};
    }
}

template <int Bits, int R>
constexpr int kStagesA = Bits == 8 ? 2 : (R >= 3 ? 3 : 4);
template <int Bits, int R>
constexpr int kStagesB = Bits == 8 ? 3 : (R >= 3 ? 4 : 6);

// Lanes per row: the wanted count, halved while half of it still covers the pieces.
int lanes_for(int wanted, int n_pieces) {
    int lanes = wanted;
    while (lanes > 1 && lanes / 2 >= n_pieces) lanes /= 2;
    return lanes;
}

Phase make_phase(int rows, int cols, int group_size, int lanes, int n_experts, int out_rows) {
    Phase p{};
    p.rows = rows;
    p.n_pieces = cols / kPieceCols;
    p.group_shift = group_size == 32 ? 0 : group_size == 64 ? 1 : 2;
    p.lanes = lanes_for(lanes, p.n_pieces);
    p.steps = (p.n_pieces + p.lanes - 1) / p.lanes;
    const int rows_per_unit = (32 / p.lanes) * out_rows;
    p.units_per_expert = (rows + rows_per_unit - 1) / rows_per_unit;
    p.n_units = p.units_per_expert * n_experts;
    return p;
}

// Resident blocks of `kernel` on the current device (the persistent grid).
template <typename Kernel>
int resident_blocks(Kernel kernel, size_t shared_bytes) {
    int device = 0;
    CHERENKOV_CUDA_CHECK(cudaGetDevice(&device));
    int sms = 0;
    CHERENKOV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    int per_sm = 0;
    CHERENKOV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, shared_bytes));
    return std::max(1, per_sm) * sms;
}

unsigned grid_for(int resident, int n_units) {
    const int wanted = (n_units + kWarpsPerBlock - 1) / kWarpsPerBlock;
    return static_cast<unsigned>(std::max(1, std::min(resident, wanted)));
}

template <int Bits, int R>
void launch_variant(const Config& config, bool deep, const Params& params, size_t x_bytes,
                    cudaStream_t stream) {
    if (config.fused) {
        auto* kernel = fused_kernel<Bits, R, kStagesA<Bits, R>>;
        // All blocks resident at once: the down units wait on other blocks' gate/up units.
        const int resident = resident_blocks(kernel, x_bytes);
        const auto grid = static_cast<unsigned>(
            std::max(1, std::min(resident, (std::max(params.gate_up.n_units, params.down.n_units) +
                                            kWarpsPerBlock - 1) /
                                               kWarpsPerBlock)));
        kernel<<<grid, kThreads, x_bytes, stream>>>(params);
        return;
    }
    auto launch_two = [&](auto gate_up_kernel, auto down_kernel) {
        gate_up_kernel<<<grid_for(resident_blocks(gate_up_kernel, x_bytes), params.gate_up.n_units),
                         kThreads, x_bytes, stream>>>(params);
        down_kernel<<<grid_for(resident_blocks(down_kernel, 0), params.down.n_units), kThreads, 0,
                      stream>>>(params);
    };
    if (deep) {
        launch_two(persistent_kernel<Bits, R, kStagesB<Bits, R>, Mode::GateUp>,
                   persistent_kernel<Bits, R, kStagesB<Bits, R>, Mode::Down>);
    } else {
        launch_two(persistent_kernel<Bits, R, kStagesA<Bits, R>, Mode::GateUp>,
                   persistent_kernel<Bits, R, kStagesA<Bits, R>, Mode::Down>);
    }
}

template <int Bits>
void launch_rows(int n_rows, const Config& config, bool deep, const Params& params, size_t x_bytes,
                 cudaStream_t stream) {
    switch (n_rows) {
        case 1: launch_variant<Bits, 1>(config, deep, params, x_bytes, stream); break;
        case 2: launch_variant<Bits, 2>(config, deep, params, x_bytes, stream); break;
        case 3: launch_variant<Bits, 3>(config, deep, params, x_bytes, stream); break;
        case 4: launch_variant<Bits, 4>(config, deep, params, x_bytes, stream); break;
        default: throw_internal("[affine_experts_variant] unchecked row count");
    }
}

// Whether `kernel` covers the call; the Current kernels run otherwise.
bool covers(ExpertKernel kernel, const ExpertShape& shape, int n_experts, int n_rows) {
    if (kernel == ExpertKernel::Current) return false;
    if (shape.bits != 2 && shape.bits != 4 && shape.bits != 8) return false;
    if (shape.group_size != 32 && shape.group_size != 64 && shape.group_size != 128) return false;
    if (shape.hidden <= 0 || shape.intermediate <= 0 || shape.hidden % shape.group_size != 0 ||
        shape.intermediate % shape.group_size != 0 || shape.hidden > (int64_t{1} << 24) ||
        shape.intermediate > (int64_t{1} << 24)) {
        return false;  // the Current kernels report the bad shape
    }
    if (n_rows < 1 || n_rows > kMaxGemvRows || n_experts < 1) return false;
    if (kernel == ExpertKernel::C && n_experts > kMaxExperts) return false;
    return static_cast<size_t>(n_rows) * static_cast<size_t>(shape.hidden) * sizeof(float) <=
           kMaxSharedXBytes;
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

void parts_variant(ExpertKernel kernel, const ExpertShape& shape, const ExpertAddress* table,
                   int n_experts, const float* x, int n_rows, float* h_scratch, float* parts,
                   cudaStream_t stream) {
    if (table == nullptr || x == nullptr || h_scratch == nullptr || parts == nullptr) {
        throw_invalid("[affine_experts_swiglu_parts_variant] null pointer");
    }
    if (!aligned16(x) || !aligned16(h_scratch)) {
        throw_invalid(
            "[affine_experts_swiglu_parts_variant] x and h_scratch must be 16-byte aligned");
    }
    const Config config = config_for(kernel);
    const auto hidden = static_cast<int>(shape.hidden);
    const auto inter = static_cast<int>(shape.intermediate);
    Params params{};
    params.table = table;
    params.gate_up = make_phase(inter, hidden, shape.group_size, config.gate_up_lanes, n_experts,
                                kOutRows<Mode::GateUp>);
    params.gate_up.x = x;
    params.gate_up.x_stride = static_cast<size_t>(hidden);
    params.gate_up.y = h_scratch;
    params.gate_up.y_stride = static_cast<size_t>(inter);
    params.gate_up.y_expert_stride = static_cast<size_t>(n_rows) * inter;
    params.down = make_phase(hidden, inter, shape.group_size, config.down_lanes, n_experts,
                             kOutRows<Mode::Down>);
    params.down.x = h_scratch;
    params.down.x_stride = static_cast<size_t>(inter);
    params.down.x_expert_stride = static_cast<size_t>(n_rows) * inter;
    params.down.y = parts;
    params.down.y_stride = static_cast<size_t>(hidden);
    params.down.y_expert_stride = static_cast<size_t>(n_rows) * hidden;
    const size_t x_bytes = static_cast<size_t>(n_rows) * hidden * sizeof(float);
    const bool deep = kernel == ExpertKernel::B;
    switch (shape.bits) {
        case 2: launch_rows<2>(n_rows, config, deep, params, x_bytes, stream); break;
        case 4: launch_rows<4>(n_rows, config, deep, params, x_bytes, stream); break;
        case 8: launch_rows<8>(n_rows, config, deep, params, x_bytes, stream); break;
        default: throw_internal("[affine_experts_variant] unchecked bit width");
    }
    CHERENKOV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

const char* expert_kernel_name(ExpertKernel kernel) {
    switch (kernel) {
        case ExpertKernel::Current: return "current";
        case ExpertKernel::A: return "A";
        case ExpertKernel::B: return "B";
        case ExpertKernel::C: return "C";
    }
    return "?";
}

void affine_experts_swiglu_parts_variant(ExpertKernel kernel, const ExpertShape& shape,
                                         const ExpertAddress* table, int n_experts, const float* x,
                                         int n_rows, float* h_scratch, float* parts, void* stream) {
    if (!covers(kernel, shape, n_experts, n_rows)) {
        affine_experts_swiglu_parts(shape, table, n_experts, x, n_rows, h_scratch, parts, stream);
        return;
    }
    parts_variant(kernel, shape, table, n_experts, x, n_rows, h_scratch, parts,
                  static_cast<cudaStream_t>(stream));
}

void affine_experts_swiglu_variant(ExpertKernel kernel, const ExpertShape& shape,
                                   const ExpertAddress* table, const float* weights, int n_experts,
                                   const float* x, int n_rows, float* scratch, float* y,
                                   bool accumulate, void* stream) {
    if (!covers(kernel, shape, n_experts, n_rows)) {
        affine_experts_swiglu(shape, table, weights, n_experts, x, n_rows, scratch, y, accumulate,
                              stream);
        return;
    }
    if (weights == nullptr || y == nullptr || scratch == nullptr) {
        throw_invalid("[affine_experts_swiglu_variant] null pointer");
    }
    const auto cs = static_cast<cudaStream_t>(stream);
    const auto hidden = static_cast<size_t>(shape.hidden);
    const auto inter = static_cast<size_t>(shape.intermediate);
    float* h = scratch;                                                       // [E, R, I]
    float* part = scratch + static_cast<size_t>(n_experts) * n_rows * inter;  // [E, R, H]
    parts_variant(kernel, shape, table, n_experts, x, n_rows, h, part, cs);
    const int outputs = n_rows * static_cast<int>(hidden);
    combine_kernel<<<(outputs + 255) / 256, 256, 0, cs>>>(part, weights, n_experts, n_rows,
                                                          static_cast<int>(hidden), y, accumulate);
    CHERENKOV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cherenkov::engine::cuda
