// GPU decode GEMV throughput: `gemv_cuda_bench [--quick] [--experts] [--active N] [--tuning K=V]`
// times engine/cuda/affine_gemv.h on the Flash shapes (dense [10240, 2560] and [2560, 6144], an
// expert [640, 2560], the short [320, 10240], [4, 10240] and [48, 2560]) at Q4/Q3/Q2 (and Q8) group
// 64 for 1, 2 and 4 input rows, and the routed-expert SwiGLU block (10 experts of hidden 2560 ×
// intermediate 640 per layer, 48 layers, without the MoE layer's combine; --experts: only
// that). Reports GB/s of weight bytes (codes + scales + biases) read, as a fraction of a read-only
// kernel's bandwidth measured in the same run (the HBM read ceiling; the device-to-device
// cudaMemcpy rate, bytes read + written, is printed beside it). Each timed launch reads a different
// copy of the weights (≥ 1 GiB in rotation, far past the 60 MB L2), and launches are replayed from
// a CUDA graph so launch gaps are those of the engine's graphs; median of the replays.
// --tuning takes the engine's kernel switches (engine/tuning.h; repeatable): e.g. expert_layer=off
// times the bulk expert kernels, gemv_bulk=off gemv_mma=off the FMA kernels. --active N routes N
// experts per layer instead of 10 (how the launches' block counts fill the multiprocessors).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "cuda_bench_support.cuh"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/kernel_policy.h"
#include "engine/tuning.h"

namespace {

using cherenkov::bench::capture;
using cherenkov::bench::fill_bf16;
using cherenkov::bench::fill_random;
using cherenkov::bench::read_kernel;
using cherenkov::bench::time_graph;

using cherenkov::engine::cuda::DeviceAffineMatrix;
using cherenkov::engine::cuda::ExpertAddress;
using cherenkov::engine::cuda::ExpertShape;

constexpr size_t kRotationBytes = size_t{1} << 30;

// A matrix's three arrays carved from one pool; offsets keep codes 256-byte aligned.
struct Layout {
    size_t code_bytes, param_count, stride;  // stride: bytes per copy
};

Layout layout(int64_t rows, int64_t cols, int bits, int group) {
    Layout l;
    l.code_bytes = static_cast<size_t>(rows * cols * bits / 8);
    l.param_count = static_cast<size_t>(rows * (cols / group));
    l.stride = (l.code_bytes + 2 * 2 * l.param_count + 255) / 256 * 256;
    return l;
}

size_t weight_bytes(const Layout& l) {
    return l.code_bytes + 4 * l.param_count;
}

DeviceAffineMatrix matrix_at(const uint8_t* base, const Layout& l, int64_t rows, int64_t cols,
                             int bits, int group) {
    DeviceAffineMatrix m;
    m.rows = rows;
    m.cols = cols;
    m.bits = bits;
    m.group_size = group;
    m.codes = base;
    m.scales = reinterpret_cast<const uint16_t*>(base + l.code_bytes);
    m.biases = m.scales + l.param_count;
    return m;
}

// Fills a pool of `copies` matrices: random codes, small BF16 scales and biases.
void fill_pool(uint8_t* pool, const Layout& l, int copies, uint64_t seed) {
    fill_random(pool, l.stride * copies, seed);
    for (int c = 0; c < copies; ++c) {
        fill_bf16(reinterpret_cast<uint16_t*>(pool + c * l.stride + l.code_bytes),
                  2 * l.param_count, seed + c);
    }
    CHECK(cudaDeviceSynchronize());
}

double read_bandwidth(cudaStream_t stream) {
    const size_t bytes = size_t{4} << 30;
    void* a;
    unsigned* sink;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&sink, sizeof(unsigned)));
    fill_random(a, bytes, 2);
    CHECK(cudaDeviceSynchronize());
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int reads = 5;
    cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
        for (int i = 0; i < reads; ++i) {
            read_kernel<<<prop.multiProcessorCount * 8, 256, 0, s>>>(static_cast<const uint4*>(a),
                                                                     bytes / 16, sink);
        }
    });
    const float ms = time_graph(exec, stream, 5);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaFree(a));
    CHECK(cudaFree(sink));
    return 1.0 * bytes * reads / (ms * 1e-3) / 1e9;
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written (GB/s).
double memcpy_bandwidth(cudaStream_t stream) {
    const size_t bytes = size_t{2} << 30;
    void *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    fill_random(a, bytes, 1);
    CHECK(cudaDeviceSynchronize());
    const int copies = 5;
    cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
        for (int i = 0; i < copies; ++i)
            CHECK(
                cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, s));
    });
    const float ms = time_graph(exec, stream, 5);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    return 2.0 * bytes * copies / (ms * 1e-3) / 1e9;
}

void print_row(const char* what, const std::string& shape, int bits, int rows, double us,
               double gbps, double ceiling) {
    std::printf("%-8s %-14s Q%-2d %4d %10.2f %9.0f %8.1f%%\n", what, shape.c_str(), bits, rows, us,
                gbps, 100.0 * gbps / ceiling);
    std::fflush(stdout);
}

void bench_dense(int64_t rows, int64_t cols, int bits, const std::vector<int>& row_counts,
                 double ceiling, cudaStream_t stream, uint8_t* pool, size_t pool_bytes,
                 const float* x, float* y) {
    const int group = 64;
    const Layout l = layout(rows, cols, bits, group);
    // At most 4096 launches per graph (a [4, 10240] matrix is 21 KB: 4096 copies are still past
    // the L2).
    const int copies = static_cast<int>(std::min<size_t>(
        {pool_bytes / l.stride, std::max<size_t>(kRotationBytes / l.stride, 8), 4096}));
    fill_pool(pool, l, copies, 17 + bits);
    for (const int n_rows : row_counts) {
        cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
            for (int c = 0; c < copies; ++c) {
                cherenkov::engine::cuda::affine_gemv(
                    matrix_at(pool + c * l.stride, l, rows, cols, bits, group), x,
                    static_cast<size_t>(cols), n_rows, y, static_cast<size_t>(rows), s);
            }
        });
        const float ms = time_graph(exec, stream, 9);
        CHECK(cudaGraphExecDestroy(exec));
        const double us = ms * 1e3 / copies;
        const std::string shape = "[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
        print_row("dense", shape, bits, n_rows, us, weight_bytes(l) / (us * 1e-6) / 1e9, ceiling);
    }
}

// 48 layers × `active` experts per token, picked at random from `experts_per_layer` per layer.
void bench_experts(int bits, int active, const std::vector<int>& row_counts, double ceiling,
                   cudaStream_t stream, uint8_t* pool, size_t pool_bytes, const float* x) {
    const int group = 64;
    const int64_t hidden = 2560, inter = 640;
    const int layers = 48;
    const Layout lg = layout(inter, hidden, bits, group);
    const Layout ld = layout(hidden, inter, bits, group);
    const size_t expert_stride = 2 * lg.stride + ld.stride;
    const int experts_per_layer =
        static_cast<int>(std::min<size_t>(64, pool_bytes / expert_stride / layers));
    const size_t n_experts = static_cast<size_t>(experts_per_layer) * layers;
    fill_random(pool, expert_stride * n_experts, 5 + bits);
    CHECK(cudaDeviceSynchronize());
    for (size_t e = 0; e < 3 * n_experts; ++e) {  // gate, up, down parameter areas
        const size_t base = (e / 3) * expert_stride + (e % 3) * lg.stride;
        const Layout& l = e % 3 == 2 ? ld : lg;
        fill_bf16(reinterpret_cast<uint16_t*>(pool + base + l.code_bytes), 2 * l.param_count, e);
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<ExpertAddress> table;
    uint64_t state = 12345;
    for (int layer = 0; layer < layers; ++layer) {
        std::vector<int> chosen;
        while (static_cast<int>(chosen.size()) < active) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            const int e =
                static_cast<int>((state >> 33) % static_cast<uint64_t>(experts_per_layer));
            if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (const int e : chosen) {
            const uint8_t* base =
                pool + (static_cast<size_t>(layer) * experts_per_layer + e) * expert_stride;
            const DeviceAffineMatrix g = matrix_at(base, lg, inter, hidden, bits, group);
            const DeviceAffineMatrix u =
                matrix_at(base + lg.stride, lg, inter, hidden, bits, group);
            const DeviceAffineMatrix d =
                matrix_at(base + 2 * lg.stride, ld, hidden, inter, bits, group);
            table.push_back({g.codes, g.scales, g.biases, u.codes, u.scales, u.biases, d.codes,
                             d.scales, d.biases});
        }
    }
    ExpertAddress* d_table;
    float* scratch;
    const ExpertShape shape{hidden, inter, bits, group};
    CHECK(cudaMalloc(&d_table, table.size() * sizeof(ExpertAddress)));
    CHECK(cudaMemcpy(d_table, table.data(), table.size() * sizeof(ExpertAddress),
                     cudaMemcpyHostToDevice));
    // h [active, 4 rows, inter] and the parts [active, 4 rows, hidden].
    CHECK(cudaMalloc(&scratch, static_cast<size_t>(active) * 4 * (inter + hidden) * sizeof(float)));
    const double token_bytes =
        static_cast<double>(layers) * active * (2 * weight_bytes(lg) + weight_bytes(ld));
    // The engine's expert GEMV (affine_experts_swiglu_parts: gate/up, SwiGLU and down); the
    // weighted combine after it is the MoE layer's (moe.cu), not timed here.
    float* h = scratch;
    float* parts = scratch + static_cast<size_t>(active) * 4 * inter;
    for (const int n_rows : row_counts) {
        cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
            for (int layer = 0; layer < layers; ++layer) {
                cherenkov::engine::cuda::affine_experts_swiglu_parts(
                    shape, d_table + layer * active, active, x, n_rows, h, parts, s);
            }
        });
        const float ms = time_graph(exec, stream, 9);
        CHECK(cudaGraphExecDestroy(exec));
        const double us = ms * 1e3;
        print_row("experts", "48x" + std::to_string(active) + "x[640,2560]", bits, n_rows, us,
                  token_bytes / (us * 1e-6) / 1e9, ceiling);
    }
    CHECK(cudaFree(d_table));
    CHECK(cudaFree(scratch));
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, experts_only = false;
    int active = 10;
    cherenkov::engine::Tuning tuning;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (std::strcmp(argv[i], "--experts") == 0) {
            experts_only = true;
        } else if (std::strcmp(argv[i], "--active") == 0 && i + 1 < argc &&
                   std::atoi(argv[i + 1]) >= 1 && std::atoi(argv[i + 1]) <= 64) {
            active = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--tuning") == 0 && i + 1 < argc) {
            try {
                cherenkov::engine::apply_tuning(tuning, argv[++i]);
            } catch (const cherenkov::Error& e) {
                std::fprintf(stderr, "gemv_cuda_bench: %s\n", e.what());
                return 2;
            }
        } else {
            std::fprintf(stderr,
                         "usage: gemv_cuda_bench [--quick] [--experts] [--active N (1-64)] "
                         "[--tuning KEY=VALUE]...\n");
            return 2;
        }
    }
    // The engine's kernel choices for device 0 under the switches given, as a model makes them.
    const cherenkov::engine::cuda::KernelPolicy policy =
        cherenkov::engine::cuda::kernel_policy_for(0, tuning);
    const cherenkov::engine::cuda::KernelScope kernels(policy);
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    read_bandwidth(stream);  // warm-up: clocks up before the ceilings are taken
    const double read_ceiling = read_bandwidth(stream);
    const double ceiling = memcpy_bandwidth(stream);
    std::printf(
        "device: %s, %d SMs, L2 %d MB; D2D cudaMemcpy %.0f GB/s (read + write); read-only kernel "
        "%.0f GB/s\n",
        prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, ceiling, read_ceiling);
    std::printf("%-8s %-14s %-3s %4s %10s %9s %9s\n", "kernel", "shape", "bits", "rows", "us/call",
                "GB/s", "of read");

    const size_t pool_bytes = size_t{12} << 30;
    uint8_t* pool;
    float *x, *y;
    CHECK(cudaMalloc(&pool, pool_bytes));
    CHECK(cudaMalloc(&x, 4 * 10240 * sizeof(float)));
    CHECK(cudaMalloc(&y, 4 * 10240 * sizeof(float)));
    fill_bf16(reinterpret_cast<uint16_t*>(x), 4 * 10240 * 2, 3);  // small floats in x
    CHECK(cudaMemset(y, 0, 4 * 10240 * sizeof(float)));

    const std::vector<int> row_counts = {1, 2, 4};
    const std::vector<int> bit_widths = quick ? std::vector<int>{4} : std::vector<int>{4, 3, 2, 8};
    // The last three are short: the hyper-connection down and inject projections and the Gated
    // DeltaNet a/b rows (column slices over a cluster on Hopper).
    const int64_t shapes[][2] = {{10240, 2560}, {2560, 6144}, {640, 2560},
                                 {320, 10240},  {4, 10240},   {48, 2560}};
    for (const auto& shape : shapes) {
        if (experts_only) break;
        for (const int bits : bit_widths) {
            bench_dense(shape[0], shape[1], bits, row_counts, read_ceiling, stream, pool,
                        pool_bytes, x, y);
        }
    }
    for (const int bits : bit_widths)
        bench_experts(bits, active, row_counts, read_ceiling, stream, pool, pool_bytes, x);
    CHECK(cudaFree(pool));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
