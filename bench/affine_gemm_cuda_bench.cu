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

#include "engine/cuda/affine_gemm.h"

namespace {

using cherenkov::engine::cuda::DeviceAffineMatrix;
using cherenkov::engine::cuda::DeviceF32Matrix;

#define CHECK(call)                                                           \
    do {                                                                      \
        const cudaError_t status_ = (call);                                   \
        if (status_ != cudaSuccess) {                                         \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(status_));                        \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

// Random words.
__global__ void fill_random_kernel(uint32_t* data, size_t n_words, uint64_t seed) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_words;
         i += size_t{gridDim.x} * blockDim.x) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        data[i] = static_cast<uint32_t>(z ^ (z >> 31));
    }
}

// BF16 values 2^-7·[1, 2) of random sign (scales, biases; as floats the upper halves of x and W).
__global__ void fill_bf16_kernel(uint16_t* data, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += size_t{gridDim.x} * blockDim.x) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL + seed;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ULL;
        const auto mantissa = static_cast<uint16_t>(z & 0x7F);
        const auto sign = static_cast<uint16_t>(((z >> 8) & 1) << 15);
        data[i] = static_cast<uint16_t>(sign | (120 << 7) | mantissa);
    }
}

void fill_random(void* data, size_t bytes, uint64_t seed) {
    fill_random_kernel<<<1024, 256>>>(static_cast<uint32_t*>(data), bytes / 4, seed);
    CHECK(cudaGetLastError());
}

void fill_bf16(void* data, size_t n, uint64_t seed) {
    fill_bf16_kernel<<<1024, 256>>>(static_cast<uint16_t*>(data), n, seed);
    CHECK(cudaGetLastError());
}

// Median milliseconds of one replay of `graph` over `replays` replays (after 3 warm-ups).
float time_graph(cudaGraphExec_t graph, cudaStream_t stream, int replays) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(graph, stream));
    std::vector<float> times;
    for (int i = 0; i < replays; ++i) {
        CHECK(cudaEventRecord(start, stream));
        CHECK(cudaGraphLaunch(graph, stream));
        CHECK(cudaEventRecord(stop, stream));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// Captures body(stream) into a graph and returns its instantiation.
template <typename Body>
cudaGraphExec_t capture(cudaStream_t stream, Body body) {
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    body(stream);
    CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    return exec;
}

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
