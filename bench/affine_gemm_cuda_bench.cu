// GPU prefill matmul throughput (engine/cuda/affine_gemm.h): affine_gemm on [10240, 2560] at
// 64, 256 and 1024 rows in TFLOP/s against the fp32 SIMT peak (2 FLOP per FMA × 128 FP32 lanes
// per SM × SMs × the boost clock: ≈ 67 TFLOP/s on an H200), and the float32 GEMV (f32_matmul at
// 1 row) on [512, 2560] in GB/s of weights read. Launches are replayed from a CUDA graph and timed
// with CUDA events (median of the replays). The GEMV rotates over enough weight copies to miss
// the 60 MB L2; the GEMM reuses one matrix, as prefill does within a layer.
// --experts: one layer's routed experts of a 256-token prefill at the Flash shape (hidden 2560,
// intermediate 640, 512 experts, top-10 of random routing: 2560 (row, slot) pairs) through the
// grouped expert_gemm launches (gate/up, then down), in µs per layer and GB/s of the weights of
// the experts hit (about 1.4 GB at Q4, far past the L2).
// Usage: affine_gemm_cuda_bench [--quick | --experts]   (--quick: Q4 only)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_bench_support.cuh"
#include "engine/cuda/affine_gemm.h"
#include "engine/cuda/expert_gemm.h"
#include "engine/cuda/expert_group.h"

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

// One layer of grouped prefill experts: every expert's three matrices in one device array.
void bench_grouped_experts(int bits, cudaStream_t stream) {
    using namespace cherenkov::engine::cuda;
    constexpr int64_t kHidden = 2560, kInter = 640;
    constexpr int kExperts = 512, kTop = 10, kTokens = 256, kGroup = 64;
    const ExpertShape shape{kHidden, kInter, bits, kGroup};
    const size_t matrix_codes = static_cast<size_t>(kHidden * kInter * bits / 8);
    const size_t matrix_params = static_cast<size_t>(kHidden * kInter / kGroup);
    const size_t expert_bytes = 3 * (matrix_codes + 2 * matrix_params * sizeof(uint16_t));
    uint8_t* codes;
    uint16_t* params;
    CHECK(cudaMalloc(&codes, 3 * matrix_codes * kExperts));
    CHECK(cudaMalloc(&params, 6 * matrix_params * kExperts * sizeof(uint16_t)));
    fill_random(codes, 3 * matrix_codes * kExperts, 5 + bits);
    fill_bf16(params, 6 * matrix_params * kExperts, 7);
    std::vector<ExpertAddress> table;
    for (size_t e = 0; e < kExperts; ++e) {
        const uint8_t* c = codes + 3 * matrix_codes * e;
        const uint16_t* p = params + 6 * matrix_params * e;
        table.push_back(ExpertAddress{
            c, p, p + matrix_params, c + matrix_codes, p + 2 * matrix_params, p + 3 * matrix_params,
            c + 2 * matrix_codes, p + 4 * matrix_params, p + 5 * matrix_params});
    }
    // Random routing: each token picks kTop distinct experts; (row, slot)s sorted by expert.
    std::vector<int32_t> expert_of(static_cast<size_t>(kTokens * kTop));
    uint64_t state = 12345;
    auto next = [&state] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<uint32_t>(state >> 33);
    };
    for (int t = 0; t < kTokens; ++t) {
        for (int j = 0; j < kTop; ++j) {
            int32_t e;
            do {
                e = static_cast<int32_t>(next() % kExperts);
            } while (std::find(expert_of.begin() + t * kTop, expert_of.begin() + t * kTop + j, e) !=
                     expert_of.begin() + t * kTop + j);
            expert_of[static_cast<size_t>(t * kTop + j)] = e;
        }
    }
    std::vector<int32_t> first(kExperts + 1, 0);
    for (const int32_t e : expert_of) ++first[static_cast<size_t>(e) + 1];
    for (size_t e = 1; e < first.size(); ++e) first[e] += first[e - 1];
    std::vector<int32_t> fill(first.begin(), first.end() - 1), slots(expert_of.size());
    for (size_t i = 0; i < expert_of.size(); ++i) {
        slots[static_cast<size_t>(fill[static_cast<size_t>(expert_of[i])]++)] =
            static_cast<int32_t>(i);
    }
    std::vector<ExpertTokenTile> tiles(
        static_cast<size_t>(max_expert_token_tiles(kTokens * kTop, kExperts)));
    ExpertGroup group(tiles, kExperts);
    int hit = 0;
    for (int e = 0; e < kExperts; ++e) {
        const int32_t n = first[static_cast<size_t>(e) + 1] - first[static_cast<size_t>(e)];
        group.add(bits, first[static_cast<size_t>(e)], n);
        hit += n > 0 ? 1 : 0;
    }
    ExpertAddress* d_table;
    ExpertTokenTile* d_tiles;
    int32_t* d_slots;
    float *mix, *h, *parts;
    CHECK(cudaMalloc(&d_table, table.size() * sizeof(ExpertAddress)));
    CHECK(cudaMalloc(&d_tiles, tiles.size() * sizeof(ExpertTokenTile)));
    CHECK(cudaMalloc(&d_slots, slots.size() * sizeof(int32_t)));
    CHECK(cudaMalloc(&mix, static_cast<size_t>(kTokens * kHidden) * sizeof(float)));
    CHECK(cudaMalloc(&h, slots.size() * kInter * sizeof(float)));
    CHECK(cudaMalloc(&parts, slots.size() * kHidden * sizeof(float)));
    CHECK(cudaMemcpy(d_table, table.data(), table.size() * sizeof(ExpertAddress),
                     cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_tiles, tiles.data(), tiles.size() * sizeof(ExpertTokenTile),
                     cudaMemcpyHostToDevice));
    CHECK(
        cudaMemcpy(d_slots, slots.data(), slots.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    fill_bf16(mix, static_cast<size_t>(kTokens * kHidden) * 2, 3);
    CHECK(cudaDeviceSynchronize());
    const ExpertGemmTiles launch{shape,           d_table, d_tiles,
                                 group.n_tiles(), d_slots, static_cast<int64_t>(slots.size())};
    constexpr int kLayers = 8;  // launches per graph replay
    cudaGraphExec_t exec = capture(stream, [&](cudaStream_t s) {
        for (int layer = 0; layer < kLayers; ++layer) {
            expert_gemm_gate_up(launch, mix, kTop, h, s);
            expert_gemm_down(launch, h, parts, s);
        }
    });
    const float ms = time_graph(exec, stream, 9);
    CHECK(cudaGraphExecDestroy(exec));
    const double us = ms * 1e3 / kLayers;
    const double bytes = static_cast<double>(expert_bytes) * hit;
    std::printf(
        "expert_gemm Q%d g%d: %d (row, slot)s over %d experts in %d tiles: %8.1f us per layer "
        "%7.0f GB/s of expert weights\n",
        bits, kGroup, kTokens * kTop, hit, group.n_tiles(), us, bytes / (us * 1e-6) / 1e9);
    std::fflush(stdout);
    for (void* p :
         {static_cast<void*>(codes), static_cast<void*>(params), static_cast<void*>(d_table),
          static_cast<void*>(d_tiles), static_cast<void*>(d_slots), static_cast<void*>(mix),
          static_cast<void*>(h), static_cast<void*>(parts)}) {
        CHECK(cudaFree(p));
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const bool experts = argc > 1 && std::strcmp(argv[1], "--experts") == 0;
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const double peak = fp32_peak_tflops(prop);
    std::printf("device: %s, %d SMs, fp32 FMA peak %.1f TFLOP/s\n", prop.name,
                prop.multiProcessorCount, peak);
    if (experts) {
        for (const int bits : {4, 2, 8}) bench_grouped_experts(bits, stream);
        CHECK(cudaStreamDestroy(stream));
        return 0;
    }
    const std::vector<int> bit_widths = quick ? std::vector<int>{4} : std::vector<int>{4, 3, 2, 8};
    for (const int bits : bit_widths) bench_gemm(bits, {64, 256, 1024}, peak, stream);
    bench_f32_gemv(stream);
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
