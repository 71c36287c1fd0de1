// The SwiGLU MLP of an MoE expert on the CPU, y = down(silu(gate·x) ⊙ up·x), for the MoE block's
// shared and routed experts (moe.cpp) and for the CUDA backend's misses computed on the CPU
// (engine/cuda/cpu_experts.h): one function, so both give the same bits for the same record.
#pragma once

#include <cstdint>
#include <span>

#include "engine/cpu/matmul.h"
#include "engine/experts/expert_source.h"
#include "engine/model/model_weights.h"

namespace cherenkov::engine {

class ThreadPool;

// y [n_rows, down.out] from x [n_rows, gate.in]. An affine gate and up of one layout share one
// preparation of x and one pool operation (matmul_shared_input; the same bits as two calls).
void swiglu(const Linear& gate, const Linear& up, const Linear& down, const float* x,
            int64_t n_rows, float* y, ThreadPool* pool, ActivationPrecision activations);

// The same for a routed expert's record views.
void expert_swiglu(const ExpertWeights& expert, const float* x, int64_t n_rows, float* y,
                   ThreadPool* pool, ActivationPrecision activations);

// Several routed experts on the same rows: ys[i] [n_rows, hidden] = expert i's SwiGLU on x. With
// one layout for all, every gate and up runs in one pool operation (matmul_shared_input) and
// every down in another (matmul_each_input), two starts and joins for the lot instead of two an
// expert; each result is what expert_swiglu gives alone, bit for bit.
void experts_swiglu(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
                    std::span<float* const> ys, ThreadPool* pool, ActivationPrecision activations);

}  // namespace cherenkov::engine
