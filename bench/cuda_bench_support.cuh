// What the CUDA micro-benchmarks share: a CHECK that exits with the failing call, random fills
// on the device (words; BF16 values 2^-7·[1, 2) of random sign for scales, biases and x),
// CUDA-graph capture with event timing (median replay), and the read-only kernel. The probes'
// launch-overlap calls are the engine's (engine/cuda/dependent_launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/cuda/dependent_launch.cuh"  // the launch-overlap calls the probes use

#define CHECK(call)                                                           \
    do {                                                                      \
        const cudaError_t status_ = (call);                                   \
        if (status_ != cudaSuccess) {                                         \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(status_));                        \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

namespace cherenkov::bench {

__global__ void fill_random_kernel(uint32_t* data, size_t n_words, uint64_t seed) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_words;
         i += size_t{gridDim.x} * blockDim.x) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        data[i] = static_cast<uint32_t>(z ^ (z >> 31));
    }
}

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

// Reads n uint4 with 16-byte loads (evict-first, as the GEMVs read weights); the xor keeps the
// loads alive. The read-only ceiling the GEMV benches compare against.
__global__ void read_kernel(const uint4* data, size_t n, unsigned* sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += size_t{gridDim.x} * blockDim.x) {
        const uint4 v = __ldcs(data + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678U) *sink = acc;
}

inline void fill_random(void* data, size_t bytes, uint64_t seed) {
    fill_random_kernel<<<1024, 256>>>(static_cast<uint32_t*>(data), bytes / 4, seed);
    CHECK(cudaGetLastError());
}

inline void fill_bf16(void* data, size_t n, uint64_t seed) {
    fill_bf16_kernel<<<1024, 256>>>(static_cast<uint16_t*>(data), n, seed);
    CHECK(cudaGetLastError());
}

// Median milliseconds of one replay of `graph` over `replays` replays (after 3 warm-ups).
inline float time_graph(cudaGraphExec_t graph, cudaStream_t stream, int replays) {
    cudaEvent_t start;
    cudaEvent_t stop;
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

}  // namespace cherenkov::bench
