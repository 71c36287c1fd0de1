// GPU prefill matmul throughput (engine/cuda/affine_gemm.h): affine_gemm on [10240, 2560] at
// 64, 256 and 1024 rows in TFLOP/s against the fp32 SIMT peak (2 FLOP per FMA × 128 FP32 lanes
// per SM × SMs × the boost clock: ≈ 67 TFLOP/s on an H200), and the float32 GEMV (f32_matmul at
// 1 row) on [512, 2560] in GB/s of weights read. Launches are replayed from a CUDA graph and timed
// with CUDA events (median of the replays). The GEMV rotates over enough weight copies to miss
// the 60 MB L2; the GEMM reuses one matrix, as prefill does within a layer.
// Usage: affine_gemm_cuda_bench [--quick]   (--quick: Q4 only)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_bench_support.cuh"
#include "engine/cuda/affine_gemm.h"

namespace {

using cherenkov::bench::capture;
using cherenkov::bench::fill_bf16;
using cherenkov::bench::fill_random;
using cherenkov::bench::time_graph;

using cherenkov::engine::cuda::DeviceAffineMatrix;
using cherenkov::engine::cuda::DeviceF32Matrix;

// fp32 FMA peak in TFLOP/s: 128 lanes per SM (sm_80+), 2 FLOP per FMA, at the boost clock.
double fp32_peak_tflops(const cudaDeviceProp& prop) {
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    return 2.0 * 128 * prop.multiProcessorCount * clock_khz * 1e3 / 1e12;
}

void bench_gemm(int bits, const std::vector<int>& row_counts, double peak, cudaStream_t stream) {
    const int64_t rows = 10240, cols = 2560;
    const int group = 64;
    const size_t code_bytes = static_cast<size_t>(rows * cols * bits / 8);
    const size_t n_params = static_cast<size_t>(rows * (cols / group));
    const int max_rows = *std::max_element(row_counts.begin(), row_counts.end());
    uint8_t* codes;
    uint16_t* params;
    float *x, *y;
    CHECK(cudaMalloc(&codes, code_bytes));
    CHECK(cudaMalloc(&params, 2 * n_params * sizeof(uint16_t)));
    CHECK(cudaMalloc(&x, static_cast<size_t>(max_rows) * cols * sizeof(float)));
    CHECK(cudaMalloc(&y, static_cast<size_t>(max_rows) * rows * sizeof(float)));
    fill_random(codes, code_bytes, 5 + bits);
    fill_bf16(params, 2 * n_params, 7);
    fill_bf16(x, static_cast<size_t>(max_rows) * cols * 2, 3);  // small floats
    CHECK(cudaDeviceSynchronize());
    const DeviceAffineMatrix w{rows, cols, bits, group, codes, params, params + n_params};
    for (const int n_rows : row_counts) {
        const int launches = std::max(2, 4096 / n_rows);
        cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
            for (int i = 0; i < launches; ++i) {
                cherenkov::engine::cuda::affine_gemm(w, x, static_cast<size_t>(cols), n_rows, y,
                                                     static_cast<size_t>(rows), s);
            }
        });
        const float ms = time_graph(exec, stream, 9);
        CHECK(cudaGraphExecDestroy(exec));
        const double us = ms * 1e3 / launches;
        const double tflops = 2.0 * rows * cols * n_rows / (us * 1e-6) / 1e12;
        std::printf(
            "affine_gemm [%lld,%lld] Q%d g%d %5d rows %10.2f us %8.2f TFLOP/s %6.1f%% of fp32 "
            "peak\n",
            static_cast<long long>(rows), static_cast<long long>(cols), bits, group, n_rows, us,
            tflops, 100.0 * tflops / peak);
        std::fflush(stdout);
    }
    CHECK(cudaFree(codes));
    CHECK(cudaFree(params));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
}

void bench_f32_gemv(cudaStream_t stream) {
    const int64_t rows = 512, cols = 2560;
    const size_t matrix_bytes = static_cast<size_t>(rows * cols) * sizeof(float);
    const int copies = 256;  // 1.3 GB in rotation, far past the L2
    float *pool, *x, *y;
    CHECK(cudaMalloc(&pool, matrix_bytes * copies));
    CHECK(cudaMalloc(&x, cols * sizeof(float)));
    CHECK(cudaMalloc(&y, rows * sizeof(float)));
    fill_bf16(pool, matrix_bytes * copies / 2, 11);
    fill_bf16(x, cols * 2, 3);
    CHECK(cudaDeviceSynchronize());
    cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
        for (int c = 0; c < copies; ++c) {
            const DeviceF32Matrix w{rows, cols, pool + static_cast<size_t>(c) * rows * cols};
            cherenkov::engine::cuda::f32_matmul(w, x, static_cast<size_t>(cols), 1, y,
                                                static_cast<size_t>(rows), s);
        }
    });
    const float ms = time_graph(exec, stream, 9);
    CHECK(cudaGraphExecDestroy(exec));
    const double us = ms * 1e3 / copies;
    std::printf("f32_matmul  [%lld,%lld] f32     1 rows %10.2f us %8.0f GB/s of weights\n",
                static_cast<long long>(rows), static_cast<long long>(cols), us,
                matrix_bytes / (us * 1e-6) / 1e9);
    CHECK(cudaFree(pool));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const double peak = fp32_peak_tflops(prop);
    std::printf("device: %s, %d SMs, fp32 FMA peak %.1f TFLOP/s\n", prop.name,
                prop.multiProcessorCount, peak);
    const std::vector<int> bit_widths = quick ? std::vector<int>{4} : std::vector<int>{4, 3, 2, 8};
    for (const int bits : bit_widths) bench_gemm(bits, {64, 256, 1024}, peak, stream);
    bench_f32_gemv(stream);
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
