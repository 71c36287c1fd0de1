// GPU token selection time (engine/cuda/token_select.h) for one row of the Qwen vocabulary
// (151,936) and of the synthetic stores' (32,768): greedy (with the selection scratch, as the
// engine calls it, and without: one block per row), and sampled at temperature 0.8 with
// top-p 0.95 or top-k 40, on three kinds of logits that set how many candidates weigh anything
// (those within ~27.7 of the best scaled logit):
//   confident: bulk N(0, 2.5), the best at 30 and a few at 20-25 (a few hundred candidates);
//   uncertain: bulk N(0, 2.5), the best at 15 (most of the row);
//   flat:      N(0, 1) (all of it; what a random-weight model gives).
// Each call (memset and kernels) is replayed from a CUDA graph and timed with CUDA events
// (median of the replays); the candidate count is read back from the selection scratch.
// Usage: token_select_cuda_bench
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "cuda_bench_support.cuh"
#include "engine/cuda/token_select.h"

namespace {

using cherenkov::bench::capture;
using cherenkov::bench::time_graph;
using cherenkov::engine::TokenChoice;

enum class Kind { Confident, Uncertain, Flat };

const char* name_of(Kind kind) {
    switch (kind) {
        case Kind::Confident: return "confident";
        case Kind::Uncertain: return "uncertain";
        default: return "flat";
    }
}

std::vector<float> make_row(int64_t vocab, Kind kind, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> bulk(0.0F, kind == Kind::Flat ? 1.0F : 2.5F);
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& v : row) v = bulk(rng);
    if (kind == Kind::Confident) {
        row[static_cast<size_t>(rng() % vocab)] = 30.0F;
        for (int n = 0; n < 8; ++n) row[static_cast<size_t>(rng() % vocab)] = 20.0F + n * 0.6F;
    } else if (kind == Kind::Uncertain) {
        row[static_cast<size_t>(rng() % vocab)] = 15.0F;
    }
    return row;
}

void bench(int64_t vocab, Kind kind, const char* what, TokenChoice choice, cudaStream_t stream,
           bool one_block = false) {
    const std::vector<float> row = make_row(vocab, kind, 7);
    const int64_t words = cherenkov::engine::cuda::token_select_scratch_words(vocab);
    float* logits = nullptr;
    TokenChoice* choices = nullptr;
    uint64_t* scratch = nullptr;
    int32_t* token = nullptr;
    CHECK(cudaMalloc(&logits, row.size() * sizeof(float)));
    CHECK(cudaMalloc(&choices, sizeof(TokenChoice)));
    CHECK(cudaMalloc(&scratch, static_cast<size_t>(words) * sizeof(uint64_t)));
    CHECK(cudaMalloc(&token, sizeof(int32_t)));
    CHECK(cudaMemcpy(logits, row.data(), row.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(choices, &choice, sizeof(TokenChoice), cudaMemcpyHostToDevice));
    uint64_t* sampled_scratch = one_block && choice.greedy() ? nullptr : scratch;
    cudaGraphExec_t graph = capture(stream, [&](cudaStream_t s) {
        cherenkov::engine::cuda::token_select(logits, 1, vocab, choices, sampled_scratch, token, s);
    });
    const float ms = time_graph(graph, stream, 50);
    uint64_t count = 0;
    if (sampled_scratch != nullptr) {
        CHECK(cudaMemcpy(&count, scratch + 1, sizeof(count), cudaMemcpyDeviceToHost));
    }
    std::printf("vocab %6lld  %-9s  %-22s  %8.1f us  candidates %lld\n",
                static_cast<long long>(vocab), name_of(kind), what, ms * 1000.0,
                static_cast<long long>(count));
    CHECK(cudaGraphExecDestroy(graph));
    CHECK(cudaFree(logits));
    CHECK(cudaFree(choices));
    CHECK(cudaFree(scratch));
    CHECK(cudaFree(token));
}

}  // namespace

int main() {
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    for (const int64_t vocab : {int64_t{151936}, int64_t{32768}}) {
        for (const Kind kind : {Kind::Confident, Kind::Uncertain, Kind::Flat}) {
            bench(vocab, kind, "greedy", TokenChoice{}, stream);
            bench(vocab, kind, "greedy, no scratch", TokenChoice{}, stream, true);
            bench(vocab, kind, "T 0.8, top-p 0.95", TokenChoice{0.8F, 0, 0.95F, 0.37}, stream);
            bench(vocab, kind, "T 0.8, top-k 40", TokenChoice{0.8F, 40, 1.0F, 0.37}, stream);
        }
    }
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
