// Probe for the routed-expert decode GEMV at one row (docs/notes/gemv-attempts.md, eleventh
// attempt): weights straight into registers by many small blocks, every load issued before any use,
// and the integer tensor cores (mma.sync m16n8k32, u8 codes × s8 digits of x). x is quantized once
// per call by a small launch into 23-bit fixed point per group of 64 (three balanced base-256
// digits), so a word of 4-bit codes is an mma operand after one mask (and one shift for the odd
// codes), where the bf16 kernels decode every code into an exact bf16 integer.
//   Q        quantizes x: digits laid out as the B fragments, a power-of-two scale and Σx per group
//   gate/up  a block per 8 intermediate rows of an expert (8 gate + 8 up rows: one m16 tile), 8
//            warps over K (5 groups each, 80 bytes of codes per lane); SwiGLU in the epilogue
//   down     a block per 64 output rows of an expert (4 tiles × 2 K halves); the block
//            quantizes its expert's h (640 values) itself while its weights arrive
//   combine  y = Σ_e 0.1 · part_e, in expert order
// Launches overlap (programmatic dependent launch); gate/up and down issue their weight loads
// before they wait for the previous launch (the table is known before Q runs). Checked against a
// double-precision host reference on layer 0; then times 48 layers × 10 random experts (Flash
// shape, Q4 g64) from a CUDA graph, against a read-only kernel's bandwidth in the same run, in
// several forms (`forms` in main): all four launches, without Q (digits made outside the graph),
// without the combine, each launch alone (chained 48 times: what it adds to a layer), and builds
// of gate/up and down with other register caps (how many blocks a multiprocessor holds, and so
// how many waves a layer's launch takes). Before those, the engine's one-launch layer kernel (its
// copy with timestamps, expert_layer_traced.cuh): checked at 1, 2 and 4 rows, its timeline (every
// block's %globaltimer stamps, print_timeline), then timed. `--trace`: the checks and the timeline
// only. Experiment 03 of dev/cuda (README.md there): not the product.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda_bench_support.cuh"
#include "expert_layer_traced.cuh"

namespace {

using cherenkov::bench::capture;
using cherenkov::bench::fill_bf16;
using cherenkov::bench::fill_random;
using cherenkov::bench::read_kernel;
using cherenkov::bench::time_graph;
using cherenkov::engine::cuda::allow_next_kernel;
using cherenkov::engine::cuda::wait_for_previous_kernel;

constexpr int kHidden = 2560;
constexpr int kInter = 640;
constexpr int kGroup = 64;
constexpr int kLayers = 48;
constexpr int kActive = 10;
constexpr int kPerLayer = 64;
constexpr int kHiddenGroups = kHidden / kGroup;  // 40
constexpr int kInterGroups = kInter / kGroup;    // 10

struct Matrix {
    const uint8_t* codes;  // [rows, cols / 2]
    const uint16_t* scales;
    const uint16_t* biases;  // bf16 [rows, cols / 64]
};
struct Expert {
    Matrix gate, up, down;
};

// Per group of x: digits d[step 2][digit 3][quad lane 4] as the mma's B fragment (uint2: b0, b1),
// and (2^(e-22), Σx).
struct XGroup {
    uint2 b[2][3][4];
};

__device__ __forceinline__ float bf16(uint32_t bits) {
    return __uint_as_float(bits << 16);
}

__device__ __forceinline__ uint2 load_stream2(const void* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}

using cherenkov::engine::cuda::expert_layer::detail::mma_u8s8;

// Quantizes 2 values per lane of one group of 64 (lane l holds positions 2l, 2l+1) into the B
// layout: position p = 16c + 8s + 2i + o sits in byte i of b[s][digit][c].(o ? y : x).
// Returns through `factor` (2^(e-22), Σx) on every lane.
__device__ __forceinline__ void quantize_group(float v0, float v1, int lane, XGroup* out,
                                               float2* factor) {
    float m = fmaxf(fabsf(v0), fabsf(v1));
    float s = v0 + v1;
    for (int o = 16; o > 0; o >>= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFU, m, o));
        s += __shfl_xor_sync(0xFFFFFFFFU, s, o);
    }
    int e = 0;
    if (m > 0.0F) frexpf(m, &e);  // m < 2^e
    const float to_int = ldexpf(1.0F, 22 - e);
    auto* bytes = reinterpret_cast<int8_t*>(out);
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        const int p = 2 * lane + o;
        const int q = __float2int_rn((o == 0 ? v0 : v1) * to_int);  // |q| ≤ 2^22
        const int d0 = ((q + 128) & 255) - 128;
        const int r = (q - d0) >> 8;
        const int d1 = ((r + 128) & 255) - 128;
        const int d2 = (r - d1) >> 8;
        const int c = p / 16, st = (p / 8) % 2, i = (p % 8) / 2, odd = p % 2;
        const int digits[3] = {d0, d1, d2};
#pragma unroll
        for (int n = 0; n < 3; ++n) {
            bytes[((st * 3 + n) * 4 + c) * 8 + odd * 4 + i] = static_cast<int8_t>(digits[n]);
        }
    }
    *factor = make_float2(ldexpf(1.0F, e - 22), s);
}

// One warp per group of x.
__global__ void quantize_kernel(const float* x, XGroup* groups, float2* factors) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int g = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    if (g >= kHiddenGroups) return;
    float2 f;
    const float2 v = reinterpret_cast<const float2*>(x + g * kGroup)[lane];
    quantize_group(v.x, v.y, lane, groups + g, &f);
    if (lane == 0) factors[g] = f;
}

// The per-lane column weights of the D fragment: lane quad index c holds columns 2c, 2c+1 =
// digits (0, 1) for c = 0, digit 2 (and an empty column) for c = 1, empty columns beyond.
__device__ __forceinline__ float2 digit_weights(int c) {
    return c == 0   ? make_float2(1.0F, 256.0F)
           : c == 1 ? make_float2(65536.0F, 0.0F)
                    : make_float2(0.0F, 0.0F);
}

// Adds one group's sums of rows g (h = 0) and g + 8 (h = 1) to acc.
struct RowAcc {
    float col[2][2] = {};  // [h][column of the lane]
    float bias[2] = {};
};

__device__ __forceinline__ void multiply_group(const uint2 (&w)[2], const XGroup& xg, float2 f,
                                               float scale0, float bias0, float scale1, float bias1,
                                               int lane, RowAcc& acc) {
    const int g = lane >> 2, c = lane & 3;
    int d[4] = {0, 0, 0, 0};
#pragma unroll
    for (int st = 0; st < 2; ++st) {
        const uint32_t w0 = st == 0 ? w[0].x : w[0].y;  // row g
        const uint32_t w1 = st == 0 ? w[1].x : w[1].y;  // row g + 8
        const uint2 b = g < 3 ? xg.b[st][g][c] : make_uint2(0, 0);
        mma_u8s8(d, w0 & 0x0F0F0F0FU, w1 & 0x0F0F0F0FU, (w0 >> 4) & 0x0F0F0F0FU,
                 (w1 >> 4) & 0x0F0F0F0FU, b.x, b.y);
    }
    const float s0 = scale0 * f.x, s1 = scale1 * f.x;
    acc.col[0][0] = fmaf(s0, static_cast<float>(d[0]), acc.col[0][0]);
    acc.col[0][1] = fmaf(s0, static_cast<float>(d[1]), acc.col[0][1]);
    acc.col[1][0] = fmaf(s1, static_cast<float>(d[2]), acc.col[1][0]);
    acc.col[1][1] = fmaf(s1, static_cast<float>(d[3]), acc.col[1][1]);
    const float sx = c == 0 ? f.y : 0.0F;
    acc.bias[0] = fmaf(bias0, sx, acc.bias[0]);
    acc.bias[1] = fmaf(bias1, sx, acc.bias[1]);
}

// Row h's total over the quad (fixed order), on every lane of the quad.
__device__ __forceinline__ float row_total(const RowAcc& acc, int h, int c) {
    const float2 wt = digit_weights(c);
    float v = fmaf(acc.col[h][0], wt.x, fmaf(acc.col[h][1], wt.y, acc.bias[h]));
    v += __shfl_xor_sync(0xFFFFFFFFU, v, 1);
    v += __shfl_xor_sync(0xFFFFFFFFU, v, 2);
    return v;
}

constexpr int kWarps = 8;
constexpr int kGroupsPerWarp = 5;

// grid (I / 8, experts), W·32 threads; W warps over K, G groups each (W·G = 40). W = 8 (5 groups,
// 80 bytes of codes per lane) needs 1.2 waves at 5 blocks per multiprocessor; W = 4 (10 groups,
// 160 bytes per lane) fits 7 blocks per multiprocessor at ≤ 73 registers: one wave.
template <int W, int G, int MinBlocks>
__global__ void __launch_bounds__(W * 32, MinBlocks)
    gate_up_kernel(const Expert* table, const XGroup* xgroups, const float2* factors, float* h) {
    static_assert(W * G == kHiddenGroups, "the warps cover K");
    constexpr int kSlots = (G + 3) / 4;
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2, c = lane & 3;
    const Expert& ex = table[blockIdx.y];
    const int row = static_cast<int>(blockIdx.x) * 8 + g;
    const int g0 = warp * G;
    uint2 wg[G], wu[G];
    const uint8_t* gate_row = ex.gate.codes + static_cast<size_t>(row) * (kHidden / 2) + 8 * c;
    const uint8_t* up_row = ex.up.codes + static_cast<size_t>(row) * (kHidden / 2) + 8 * c;
#pragma unroll
    for (int j = 0; j < G; ++j) {
        wg[j] = load_stream2(gate_row + (g0 + j) * 32);
        wu[j] = load_stream2(up_row + (g0 + j) * 32);
    }
    // Lane c of the quad holds the parameters of groups g0 + 4k + c.
    uint32_t gs[kSlots], gb[kSlots], us[kSlots], ub[kSlots];
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
        const int pi = row * kHiddenGroups + g0 + min(4 * k + c, G - 1);
        gs[k] = ex.gate.scales[pi];
        gb[k] = ex.gate.biases[pi];
        us[k] = ex.up.scales[pi];
        ub[k] = ex.up.biases[pi];
    }
    wait_for_previous_kernel();  // Q's digits
    allow_next_kernel();
    RowAcc acc;
    const int quad = lane & ~3;
#pragma unroll
    for (int j = 0; j < G; ++j) {
        const int src = quad | (j & 3);
        const uint32_t sgs = __shfl_sync(0xFFFFFFFFU, gs[j / 4], src);
        const uint32_t sgb = __shfl_sync(0xFFFFFFFFU, gb[j / 4], src);
        const uint32_t sus = __shfl_sync(0xFFFFFFFFU, us[j / 4], src);
        const uint32_t sub = __shfl_sync(0xFFFFFFFFU, ub[j / 4], src);
        const uint2 w[2] = {wg[j], wu[j]};
        multiply_group(w, xgroups[g0 + j], factors[g0 + j], bf16(sgs), bf16(sgb), bf16(sus),
                       bf16(sub), lane, acc);
    }
    __shared__ float partial[W][8][2];
    const float gate = row_total(acc, 0, c), up = row_total(acc, 1, c);
    if (c == 0) {
        partial[warp][g][0] = gate;
        partial[warp][g][1] = up;
    }
    __syncthreads();
    if (warp == 0 && c == 0) {
        float sg = 0.0F, su = 0.0F;
        for (int w = 0; w < W; ++w) {
            sg += partial[w][g][0];
            su += partial[w][g][1];
        }
        h[static_cast<size_t>(blockIdx.y) * kInter + row] = sg / (1.0F + __expf(-sg)) * su;
    }
}

// grid (H / 64, experts), 256 threads: warp = 2·tile + half. MinBlocks 4 caps the registers at
// 64, so that the 400 blocks of a layer fit in one wave (3 per multiprocessor hold 396).
template <int MinBlocks>
__global__ void __launch_bounds__(256, MinBlocks)
    down_kernel(const Expert* table, const float* h, float* parts) {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const int g = lane >> 2, c = lane & 3;
    const int tile = warp >> 1, half = warp & 1;
    const Expert& ex = table[blockIdx.y];
    const int row0 = static_cast<int>(blockIdx.x) * 64 + tile * 16 + g;
    const int g0 = half * kGroupsPerWarp;
    uint2 w0[kGroupsPerWarp], w1[kGroupsPerWarp];
    const uint8_t* r0 = ex.down.codes + static_cast<size_t>(row0) * (kInter / 2) + 8 * c;
    const uint8_t* r1 = r0 + size_t{8} * (kInter / 2);
#pragma unroll
    for (int j = 0; j < kGroupsPerWarp; ++j) {
        w0[j] = load_stream2(r0 + (g0 + j) * 32);
        w1[j] = load_stream2(r1 + (g0 + j) * 32);
    }
    const int pi = row0 * kInterGroups + g0 + c, pj = pi + 8 * kInterGroups;
    const uint32_t s0 = ex.down.scales[pi], b0 = ex.down.biases[pi];
    const uint32_t s1 = ex.down.scales[pj], b1 = ex.down.biases[pj];
    const int p4 = row0 * kInterGroups + g0 + 4, q4 = p4 + 8 * kInterGroups;
    const uint32_t s04 = ex.down.scales[p4], b04 = ex.down.biases[p4];
    const uint32_t s14 = ex.down.scales[q4], b14 = ex.down.biases[q4];
    wait_for_previous_kernel();  // gate/up's h
    allow_next_kernel();
    __shared__ XGroup hg[kInterGroups];
    __shared__ float2 hf[kInterGroups];
    for (int q = warp; q < kInterGroups; q += kWarps) {
        const float2 v = reinterpret_cast<const float2*>(
            h + static_cast<size_t>(blockIdx.y) * kInter + q * kGroup)[lane];
        float2 f;
        quantize_group(v.x, v.y, lane, hg + q, &f);
        if (lane == 0) hf[q] = f;
    }
    __syncthreads();
    RowAcc acc;
    const int quad = lane & ~3;
#pragma unroll
    for (int j = 0; j < kGroupsPerWarp; ++j) {
        const int src = quad | (j & 3);
        const uint32_t a = __shfl_sync(0xFFFFFFFFU, j < 4 ? s0 : s04, j < 4 ? src : quad);
        const uint32_t b = __shfl_sync(0xFFFFFFFFU, j < 4 ? b0 : b04, j < 4 ? src : quad);
        const uint32_t a1 = __shfl_sync(0xFFFFFFFFU, j < 4 ? s1 : s14, j < 4 ? src : quad);
        const uint32_t bb = __shfl_sync(0xFFFFFFFFU, j < 4 ? b1 : b14, j < 4 ? src : quad);
        const uint2 w[2] = {w0[j], w1[j]};
        multiply_group(w, hg[g0 + j], hf[g0 + j], bf16(a), bf16(b), bf16(a1), bf16(bb), lane, acc);
    }
    __shared__ float partial[kWarps][8][2];
    const float t0 = row_total(acc, 0, c), t1 = row_total(acc, 1, c);
    if (c == 0) {
        partial[warp][g][0] = t0;
        partial[warp][g][1] = t1;
    }
    __syncthreads();
    if (half == 0 && c == 0) {
        float* out = parts + static_cast<size_t>(blockIdx.y) * kHidden;
        out[row0] = partial[warp][g][0] + partial[warp + 1][g][0];
        out[row0 + 8] = partial[warp][g][1] + partial[warp + 1][g][1];
    }
}

__global__ void combine_kernel(const float* parts, float* y) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int d = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (d >= kHidden) return;
    float v[kActive];
#pragma unroll
    for (int e = 0; e < kActive; ++e) v[e] = parts[static_cast<size_t>(e) * kHidden + d];
    float sum = 0.0F;
#pragma unroll
    for (int e = 0; e < kActive; ++e) sum = fmaf(0.1F, v[e], sum);
    y[d] = sum;
}

// A launch with launch overlap (programmatic stream serialization) and `smem` dynamic bytes.
template <typename Kernel, typename... Args>
void launch_with(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Args... args) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
    launch_with(kernel, grid, block, 0, stream, args...);
}

// The one-launch layer kernel (engine/cuda/expert_layer_imma.cuh) for `Rows` rows.
struct LayerKernel {
    int slots[5] = {};  // by rows
    size_t smem[5] = {};
    unsigned long long* blocks_started = nullptr;
    unsigned long long* h_tagged = nullptr;  // [kActive, 4, kInter]
};

template <int Rows>
void prepare_layer_kernel(LayerKernel& k) {
    namespace el = cherenkov::engine::cuda::expert_layer;
    int device = 0, optin = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const el::Shape shape{kHidden, kInter};
    k.slots[Rows] = el::slots_that_fit(shape, Rows, optin);
    k.smem[Rows] = static_cast<size_t>(
        el::smem_layout(shape, Rows, k.slots[Rows], el::item_bytes(shape)).total);
    CHECK(cudaFuncSetAttribute(el::experts_layer_kernel<Rows>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(k.smem[Rows])));
    std::printf("layer kernel, %d rows: %d slots of %d bytes, %zu bytes of shared memory\n", Rows,
                k.slots[Rows], el::item_bytes(shape), k.smem[Rows]);
}

template <int Rows>
void launch_layer_kernel(const LayerKernel& k, const Expert* table, const float* x, float* h,
                         float* parts, cudaStream_t s, int n_sms,
                         unsigned long long* trace = nullptr) {
    namespace el = cherenkov::engine::cuda::expert_layer;
    el::Params p{};
    p.table = reinterpret_cast<const cherenkov::engine::cuda::ExpertAddress*>(table);
    p.n_in_use = nullptr;
    p.capacity = kActive;
    p.x = x;
    p.h = h;
    p.parts = parts;
    p.blocks_started = k.blocks_started;
    p.h_tagged = k.h_tagged;
    p.shape = el::Shape{kHidden, kInter};
    p.n_slots = k.slots[Rows];
    p.slot_bytes = el::item_bytes(p.shape);
    p.trace = trace;
    launch_with(el::experts_layer_kernel<Rows>, dim3(static_cast<unsigned>(n_sms)),
                dim3(el::kThreads), k.smem[Rows], s, p);
}

// Matrix bytes: codes, then bf16 scales and biases, 256-byte aligned pieces.
size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}
struct Sizes {
    size_t codes, params, stride;
};
Sizes sizes(int rows, int cols) {
    const size_t codes = align256(static_cast<size_t>(rows) * cols / 2);
    const size_t params = align256(static_cast<size_t>(rows) * (cols / kGroup) * 2);
    return {codes, params, codes + 2 * params};
}

std::vector<uint16_t> download16(const uint16_t* p, size_t n) {
    std::vector<uint16_t> v(n);
    CHECK(cudaMemcpy(v.data(), p, n * 2, cudaMemcpyDeviceToHost));
    return v;
}

double host_bf16(uint16_t b) {
    uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// y = W x (double) for a matrix on the device; |W||x| into mag.
std::vector<double> host_gemv(const Matrix& m, int rows, int cols, const std::vector<double>& x,
                              std::vector<double>* mag) {
    std::vector<uint8_t> codes(static_cast<size_t>(rows) * cols / 2);
    CHECK(cudaMemcpy(codes.data(), m.codes, codes.size(), cudaMemcpyDeviceToHost));
    const std::vector<uint16_t> s = download16(m.scales, static_cast<size_t>(rows) * cols / kGroup);
    const std::vector<uint16_t> b = download16(m.biases, s.size());
    std::vector<double> y(rows);
    mag->assign(rows, 0.0);
    for (int r = 0; r < rows; ++r) {
        double sum = 0.0, a = 0.0;
        for (int k = 0; k < cols; ++k) {
            const uint8_t byte = codes[static_cast<size_t>(r) * cols / 2 + k / 2];
            const int q = k % 2 == 0 ? byte & 15 : byte >> 4;
            const size_t gi = static_cast<size_t>(r) * (cols / kGroup) + k / kGroup;
            const double w = host_bf16(s[gi]) * q + host_bf16(b[gi]);
            sum += w * x[k];
            a += (std::abs(host_bf16(s[gi]) * q) + 2 * std::abs(host_bf16(b[gi]))) * std::abs(x[k]);
        }
        y[r] = sum;
        (*mag)[r] = a;
    }
    return y;
}

}  // namespace

// The timeline of 48 layers at one row: every block's events (expert_layer::kTraceEvents), in
// µs from the layer's first block entry; per event the median and the largest over blocks, each
// averaged over layers 1-47.
void print_timeline(const std::vector<unsigned long long>& trace, int n_sms) {
    namespace el = cherenkov::engine::cuda::expert_layer;
    const int ev = el::kTraceEvents;
    const auto at = [&](int layer, int block, int e) {
        return trace[(static_cast<size_t>(layer) * n_sms + block) * ev + e];
    };
    std::vector<double> med(ev, 0), max(ev, 0), seen(ev, 0);
    double span = 0, gap = 0, period = 0, last_landed_med = 0, last_landed_max = 0;
    const int first = 1, last = kLayers - 1;
    for (int layer = first; layer < last; ++layer) {
        unsigned long long t0 = ~0ULL, end = 0, next0 = ~0ULL;
        for (int b = 0; b < n_sms; ++b) {
            t0 = std::min(t0, at(layer, b, 0));
            next0 = std::min(next0, at(layer + 1, b, 0));
        }
        std::vector<double> landed_last;
        for (int e = 0; e < ev; ++e) {
            std::vector<double> v;
            for (int b = 0; b < n_sms; ++b) {
                const unsigned long long t = at(layer, b, e);
                if (t == 0) continue;
                v.push_back((t - t0) * 1e-3);
                if (e >= 4 && (e - 4) % 3 == 2) end = std::max(end, t);
            }
            if (v.empty()) continue;
            std::sort(v.begin(), v.end());
            med[e] += v[v.size() / 2];
            max[e] += v.back();
            seen[e] += 1;
        }
        for (int b = 0; b < n_sms; ++b) {
            unsigned long long l = 0;
            for (int k = 0; k < el::kTraceItems; ++k) l = std::max(l, at(layer, b, 4 + 3 * k));
            landed_last.push_back((l - t0) * 1e-3);
        }
        std::sort(landed_last.begin(), landed_last.end());
        last_landed_med += landed_last[landed_last.size() / 2];
        last_landed_max += landed_last.back();
        span += (end - t0) * 1e-3;
        gap += (static_cast<double>(next0) - static_cast<double>(end)) * 1e-3;
        period += (next0 - t0) * 1e-3;
    }
    const double n = last - first;
    std::printf(
        "timeline, 1 row, layers %d-%d: period %.2f us, span %.2f us, gap to the next "
        "layer %.2f us; a block's last item landed: median %.2f, max %.2f us\n",
        first, last - 1, period / n, span / n, gap / n, last_landed_med / n, last_landed_max / n);
    const char* names[] = {"entry", "past the wait", "first copies issued", "x quantized"};
    for (int e = 0; e < ev; ++e) {
        if (seen[e] == 0) continue;
        char label[64];
        if (e < 4) {
            std::snprintf(label, sizeof label, "%s", names[e]);
        } else {
            const char* what[] = {"landed", "h ready", "done"};
            std::snprintf(label, sizeof label, "item %d %s", (e - 4) / 3, what[(e - 4) % 3]);
        }
        std::printf("  %-24s median %6.2f  max %6.2f us  (%g layers)\n", label, med[e] / seen[e],
                    max[e] / seen[e], seen[e]);
    }
}

int main(int argc, char** argv) {
    const bool trace_only = argc > 1 && std::strcmp(argv[1], "--trace") == 0;
    const Sizes gs = sizes(kInter, kHidden), ds = sizes(kHidden, kInter);
    const size_t expert_bytes = 2 * gs.stride + ds.stride;
    const size_t n_experts = size_t{kLayers} * kPerLayer;
    uint8_t* pool;
    CHECK(cudaMalloc(&pool, expert_bytes * n_experts));
    fill_random(pool, expert_bytes * n_experts, 11);
    CHECK(cudaDeviceSynchronize());
    std::vector<Expert> experts(n_experts);
    for (size_t e = 0; e < n_experts; ++e) {
        uint8_t* base = pool + e * expert_bytes;
        const auto matrix = [&](uint8_t* at, const Sizes& z, uint64_t seed) {
            fill_bf16(at + z.codes, z.params, seed);  // scales and biases
            return Matrix{at, reinterpret_cast<const uint16_t*>(at + z.codes),
                          reinterpret_cast<const uint16_t*>(at + z.codes + z.params)};
        };
        experts[e] = Expert{matrix(base, gs, 3 * e), matrix(base + gs.stride, gs, 3 * e + 1),
                            matrix(base + 2 * gs.stride, ds, 3 * e + 2)};
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<Expert> table;
    uint64_t state = 12345;
    for (int layer = 0; layer < kLayers; ++layer) {
        std::vector<int> chosen;
        while (static_cast<int>(chosen.size()) < kActive) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            const int e = static_cast<int>((state >> 33) % kPerLayer);
            if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (const int e : chosen)
            table.push_back(experts[static_cast<size_t>(layer) * kPerLayer + e]);
    }
    Expert* d_table;
    CHECK(cudaMalloc(&d_table, table.size() * sizeof(Expert)));
    CHECK(cudaMemcpy(d_table, table.data(), table.size() * sizeof(Expert), cudaMemcpyHostToDevice));
    std::vector<float> x(kHidden);
    uint64_t z = 99;
    for (float& v : x) {
        z = z * 6364136223846793005ULL + 1442695040888963407ULL;
        v = (static_cast<float>((z >> 40) & 0xFFFF) / 32768.0F - 1.0F) * (1 + (z >> 63) * 20.0F);
    }
    float *d_x, *d_h, *d_parts, *d_y;
    XGroup* d_groups;
    float2* d_factors;
    CHECK(cudaMalloc(&d_x, kHidden * 4));
    CHECK(cudaMalloc(&d_h, kActive * kInter * 4));
    CHECK(cudaMalloc(&d_parts, kActive * kHidden * 4));
    CHECK(cudaMalloc(&d_y, kHidden * 4));
    CHECK(cudaMalloc(&d_groups, kHiddenGroups * sizeof(XGroup)));
    CHECK(cudaMalloc(&d_factors, kHiddenGroups * sizeof(float2)));
    CHECK(cudaMemcpy(d_x, x.data(), kHidden * 4, cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // A form is a set of launches per layer; the gate/up kernel is one of four builds.
    enum : unsigned { kQ = 1, kGateUp = 2, kDown = 4, kCombine = 8 };
    struct Form {
        const char* name;
        unsigned parts;
        int gate_up;  // 0: 8 warps (as compiled), 1: 8 warps ≤ 64 registers, 2: ≤ 51, 3: 4 warps
        int down_min_blocks = 1;  // 1 (as compiled) or 4 (≤ 64 registers)
    };
    const Form forms[] = {
        {"Q + gate/up + down + combine", kQ | kGateUp | kDown | kCombine, 0},
        {"gate/up + down + combine (no Q)", kGateUp | kDown | kCombine, 0},
        {"gate/up + down (no Q, no combine)", kGateUp | kDown, 0},
        {"gate/up only", kGateUp, 0},
        {"down only", kDown, 0},
        {"combine only", kCombine, 0},
        {"no Q, gate/up <= 64 registers", kGateUp | kDown | kCombine, 1},
        {"no Q, gate/up <= 51 registers", kGateUp | kDown | kCombine, 2},
        {"no Q, gate/up 4 warps x 10 groups", kGateUp | kDown | kCombine, 3},
        {"down only, <= 64 registers", kDown, 0, 4},
        {"no Q, down <= 64 registers", kGateUp | kDown | kCombine, 0, 4},
        {"Q + gate/up + down + combine, down <= 64 registers", kQ | kGateUp | kDown | kCombine, 0,
         4},
    };
    const auto layer_launches = [&](cudaStream_t s, int layer, const Form& form) {
        const Expert* t = d_table + static_cast<size_t>(layer) * kActive;
        if (form.parts & kQ)
            launch(quantize_kernel, dim3(5), dim3(256), s, d_x, d_groups, d_factors);
        if (form.parts & kGateUp) {
            const dim3 grid(kInter / 8, kActive);
            const auto* f = static_cast<const float2*>(d_factors);
            switch (form.gate_up) {
                case 0:
                    launch(gate_up_kernel<8, 5, 1>, grid, dim3(256), s, t, d_groups, f, d_h);
                    break;
                case 1:
                    launch(gate_up_kernel<8, 5, 4>, grid, dim3(256), s, t, d_groups, f, d_h);
                    break;
                case 2:
                    launch(gate_up_kernel<8, 5, 5>, grid, dim3(256), s, t, d_groups, f, d_h);
                    break;
                default: launch(gate_up_kernel<4, 10, 7>, grid, dim3(128), s, t, d_groups, f, d_h);
            }
        }
        if (form.parts & kDown) {
            if (form.down_min_blocks == 4) {
                launch(down_kernel<4>, dim3(kHidden / 64, kActive), dim3(256), s, t,
                       static_cast<const float*>(d_h), d_parts);
            } else {
                launch(down_kernel<1>, dim3(kHidden / 64, kActive), dim3(256), s, t,
                       static_cast<const float*>(d_h), d_parts);
            }
        }
        if (form.parts & kCombine) {
            launch(combine_kernel, dim3(kHidden / 256), dim3(256), s,
                   static_cast<const float*>(d_parts), d_y);
        }
    };

    // Layer 0 against the host, both gate/up forms.
    for (int checked : {0, 6, 7, 8, 10}) {
        layer_launches(stream, 0, forms[checked]);
        if (checked >= 6)
            layer_launches(stream, 0, forms[0]);  // forms without Q: digits from form 0
        if (checked >= 6) layer_launches(stream, 0, forms[checked]);
        CHECK(cudaStreamSynchronize(stream));
        std::vector<float> y(kHidden);
        CHECK(cudaMemcpy(y.data(), d_y, kHidden * 4, cudaMemcpyDeviceToHost));
        std::vector<double> xd(x.begin(), x.end()), yref(kHidden, 0.0), ymag(kHidden, 0.0);
        for (int e = 0; e < kActive; ++e) {
            std::vector<double> gm, um, dm;
            const std::vector<double> g = host_gemv(table[e].gate, kInter, kHidden, xd, &gm);
            const std::vector<double> u = host_gemv(table[e].up, kInter, kHidden, xd, &um);
            std::vector<double> hh(kInter);
            for (int i = 0; i < kInter; ++i) hh[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
            const std::vector<double> d = host_gemv(table[e].down, kHidden, kInter, hh, &dm);
            for (int i = 0; i < kHidden; ++i) {
                yref[i] += 0.1 * d[i];
                ymag[i] += 0.1 * dm[i];
            }
        }
        double worst = 0.0;
        int worst_i = 0;
        for (int i = 0; i < kHidden; ++i) {
            const double err = std::abs(y[i] - yref[i]) / (ymag[i] + 1e-30);
            if (err > worst) {
                worst = err;
                worst_i = i;
            }
        }
        std::printf(
            "layer 0 vs double host reference: worst |err| / sum|w||x| %.3g at %d (%g vs %g)%s\n",
            worst, worst_i, y[worst_i], yref[worst_i], worst < 1e-4 ? "" : "  MISMATCH");
    }

    // The read-only ceiling.
    const size_t ro_bytes = size_t{4} << 30;
    void* ro;
    unsigned* sink;
    CHECK(cudaMalloc(&ro, ro_bytes));
    CHECK(cudaMalloc(&sink, 4));
    fill_random(ro, ro_bytes, 2);
    cudaGraphExec_t ro_exec = capture(stream, [&](cudaStream_t s) {
        for (int i = 0; i < 5; ++i)
            read_kernel<<<132 * 16, 256, 0, s>>>(static_cast<const uint4*>(ro), ro_bytes / 16,
                                                 sink);
    });
    const double ro_gbs = 5.0 * ro_bytes / (time_graph(ro_exec, stream, 5) * 1e-3) / 1e9;
    std::printf("read-only kernel %.0f GB/s\n", ro_gbs);
    CHECK(cudaFree(ro));

    const double token_bytes = static_cast<double>(kLayers) * kActive * expert_bytes;

    // The one-launch layer kernel: layer 0 against the host at 1, 2 and 4 rows (row 0's bits the
    // same at every row count), then 48 layers from a graph.
    {
        int n_sms = 0;
        CHECK(cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, 0));
        LayerKernel lk;
        CHECK(cudaMalloc(&lk.blocks_started, 8));
        CHECK(cudaMemset(lk.blocks_started, 0, 8));
        CHECK(cudaMalloc(&lk.h_tagged, 4 * kActive * kInter * 8));
        CHECK(cudaMemset(lk.h_tagged, 0, 4 * kActive * kInter * 8));
        prepare_layer_kernel<1>(lk);
        prepare_layer_kernel<2>(lk);
        prepare_layer_kernel<4>(lk);
        std::vector<float> x4(4 * kHidden);
        for (int t = 0; t < 4; ++t)
            for (int i = 0; i < kHidden; ++i)
                x4[t * kHidden + i] =
                    t == 0 ? x[i] : x[(i * 7 + 13 * t) % kHidden] * (t == 2 ? 1e-3F : 1.0F);
        float *d_x4, *d_h4, *d_parts4;
        CHECK(cudaMalloc(&d_x4, 4 * kHidden * 4));
        CHECK(cudaMalloc(&d_h4, 4 * kActive * kInter * 4));
        CHECK(cudaMalloc(&d_parts4, 4 * kActive * kHidden * 4));
        CHECK(cudaMemcpy(d_x4, x4.data(), x4.size() * 4, cudaMemcpyHostToDevice));
        std::vector<float> row0_bits;
        for (int rows : {1, 2, 4}) {
            CHECK(cudaMemset(d_parts4, 0xFF, 4 * kActive * kHidden * 4));
            if (rows == 1) launch_layer_kernel<1>(lk, d_table, d_x4, d_h4, d_parts4, stream, n_sms);
            if (rows == 2) launch_layer_kernel<2>(lk, d_table, d_x4, d_h4, d_parts4, stream, n_sms);
            if (rows == 4) launch_layer_kernel<4>(lk, d_table, d_x4, d_h4, d_parts4, stream, n_sms);
            CHECK(cudaStreamSynchronize(stream));
            std::vector<float> parts(static_cast<size_t>(rows) * kActive * kHidden);
            CHECK(cudaMemcpy(parts.data(), d_parts4, parts.size() * 4, cudaMemcpyDeviceToHost));
            unsigned long long started = 0;
            CHECK(cudaMemcpy(&started, lk.blocks_started, 8, cudaMemcpyDeviceToHost));
            const bool zero = started % static_cast<unsigned long long>(n_sms) == 0;
            double worst = 0.0;
            for (int t = 0; t < rows; ++t) {
                std::vector<double> xd(x4.begin() + t * kHidden, x4.begin() + (t + 1) * kHidden);
                for (int e = 0; e < kActive; ++e) {
                    std::vector<double> gm, um, dm;
                    const std::vector<double> gg =
                        host_gemv(table[e].gate, kInter, kHidden, xd, &gm);
                    const std::vector<double> uu = host_gemv(table[e].up, kInter, kHidden, xd, &um);
                    std::vector<double> hh(kInter);
                    for (int i = 0; i < kInter; ++i)
                        hh[i] = gg[i] / (1.0 + std::exp(-gg[i])) * uu[i];
                    const std::vector<double> d =
                        host_gemv(table[e].down, kHidden, kInter, hh, &dm);
                    for (int i = 0; i < kHidden; ++i) {
                        const double got = parts[(static_cast<size_t>(e) * rows + t) * kHidden + i];
                        worst = std::max(worst, std::abs(got - d[i]) / (dm[i] + 1e-30));
                    }
                }
            }
            bool same = true;
            if (rows == 1) {
                row0_bits.assign(parts.begin(), parts.end());
            } else {
                for (int e = 0; e < kActive; ++e)
                    same = same && std::memcmp(&parts[static_cast<size_t>(e) * rows * kHidden],
                                               &row0_bits[static_cast<size_t>(e) * kHidden],
                                               kHidden * 4) == 0;
            }
            std::printf(
                "layer kernel, %d rows, layer 0 vs double host: worst |err| / sum|w||x| "
                "%.3g%s; row 0 bits %s; started blocks %s\n",
                rows, worst, worst < 1e-4 ? "" : "  MISMATCH", same ? "same" : "DIFFER",
                zero ? "whole launches" : "NOT WHOLE LAUNCHES");
        }
        {
            namespace el = cherenkov::engine::cuda::expert_layer;
            const size_t per_layer = static_cast<size_t>(n_sms) * el::kTraceEvents;
            unsigned long long* d_trace;
            CHECK(cudaMalloc(&d_trace, kLayers * per_layer * 8));
            for (int pass = 0; pass < 3; ++pass) {
                CHECK(cudaMemset(d_trace, 0, kLayers * per_layer * 8));
                cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
                    for (int layer = 0; layer < kLayers; ++layer) {
                        const Expert* t = d_table + static_cast<size_t>(layer) * kActive;
                        launch_layer_kernel<1>(lk, t, d_x4, d_h4, d_parts4, s, n_sms,
                                               d_trace + layer * per_layer);
                    }
                });
                CHECK(cudaGraphLaunch(exec, stream));
                CHECK(cudaStreamSynchronize(stream));
                CHECK(cudaGraphExecDestroy(exec));
            }
            std::vector<unsigned long long> trace(kLayers * per_layer);
            CHECK(cudaMemcpy(trace.data(), d_trace, trace.size() * 8, cudaMemcpyDeviceToHost));
            print_timeline(trace, n_sms);
            CHECK(cudaFree(d_trace));
        }
        for (int repeat = 0; repeat < 2 && !trace_only; ++repeat) {
            for (int form = 0; form < 4; ++form) {
                cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
                    for (int layer = 0; layer < kLayers; ++layer) {
                        const Expert* t = d_table + static_cast<size_t>(layer) * kActive;
                        if (form == 0 || form == 1)
                            launch_layer_kernel<1>(lk, t, d_x4, d_h4, d_parts4, s, n_sms);
                        if (form == 1) {  // at one row the parts are [kActive, kHidden]
                            launch(combine_kernel, dim3(kHidden / 256), dim3(256), s,
                                   static_cast<const float*>(d_parts4), d_y);
                        }
                        if (form == 2)
                            launch_layer_kernel<2>(lk, t, d_x4, d_h4, d_parts4, s, n_sms);
                        if (form == 3)
                            launch_layer_kernel<4>(lk, t, d_x4, d_h4, d_parts4, s, n_sms);
                    }
                });
                const float ms = time_graph(exec, stream, 9);
                CHECK(cudaGraphExecDestroy(exec));
                const double gbs = token_bytes / (ms * 1e-3) / 1e9;
                static const char* names[] = {
                    "layer kernel, 1 row",
                    "layer kernel + combine, 1 row",
                    "layer kernel, 2 rows",
                    "layer kernel, 4 rows",
                };
                std::printf(
                    "int8 experts, %-52s %7.1f us/token  %6.0f GB/s  %4.1f%% of read-only\n",
                    names[form], ms * 1e3, gbs, 100.0 * gbs / ro_gbs);
            }
        }
    }
    if (trace_only) return 0;
    for (int repeat = 0; repeat < 2; ++repeat)
        for (const Form& form : forms) {
            cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
                for (int layer = 0; layer < kLayers; ++layer) layer_launches(s, layer, form);
            });
            const float ms = time_graph(exec, stream, 9);
            CHECK(cudaGraphExecDestroy(exec));
            const double gbs = token_bytes / (ms * 1e-3) / 1e9;
            std::printf("int8 experts, %-52s %7.1f us/token  %6.0f GB/s  %4.1f%% of read-only\n",
                        form.name, ms * 1e3, gbs, 100.0 * gbs / ro_gbs);
        }
    return 0;
}
