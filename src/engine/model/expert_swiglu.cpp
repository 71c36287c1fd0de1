#include "engine/model/expert_swiglu.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "engine/model/ops.h"

namespace cherenkov::engine {

void swiglu(const Linear& gate, const Linear& up, const Linear& down, const float* x,
            int64_t n_rows, float* y, ThreadPool* pool, ActivationPrecision activations) {
    const int64_t inter = gate.out_features();
    std::vector<float> g(static_cast<size_t>(n_rows * inter));
    std::vector<float> u(static_cast<size_t>(n_rows * inter));
    const bool shared_input = gate.quantized && up.quantized && gate.bias == nullptr &&
                              up.bias == nullptr && same_input_layout(gate.affine, up.affine);
    if (shared_input) {
        const AffineMatrix* const matrices[] = {&gate.affine, &up.affine};
        float* const outputs[] = {g.data(), u.data()};
        matmul_shared_input(matrices, x, static_cast<size_t>(gate.in_features()), n_rows, outputs,
                            pool, activations);
    } else {
        gate.apply(x, n_rows, g.data(), pool, activations);
        up.apply(x, n_rows, u.data(), pool, activations);
    }
    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
    down.apply(g.data(), n_rows, y, pool, activations);
}

namespace {

Linear as_linear(const AffineMatrix& m) {
    Linear l;
    l.quantized = true;
    l.affine = m;
    return l;
}

}  // namespace

void expert_swiglu(const ExpertWeights& expert, const float* x, int64_t n_rows, float* y,
                   ThreadPool* pool, ActivationPrecision activations) {
    swiglu(as_linear(expert.gate), as_linear(expert.up), as_linear(expert.down), x, n_rows, y,
           pool, activations);
}

void experts_swiglu(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
                    std::span<float* const> ys, ThreadPool* pool, ActivationPrecision activations) {
    CHERENKOV_ASSERT(experts.size() == ys.size(), "one output per expert");
    if (experts.empty()) return;
    const ExpertWeights& first = experts.front();
    const bool one_layout = std::all_of(experts.begin(), experts.end(), [&](const ExpertWeights& e) {
        return same_input_layout(e.gate, first.gate) && same_input_layout(e.up, first.gate) &&
               same_input_layout(e.down, first.down) && e.gate.rows == first.gate.rows &&
               e.up.rows == first.gate.rows && e.down.rows == first.down.rows;
    });
    if (!one_layout) {  // mixed precisions: one expert at a time
        for (size_t i = 0; i < experts.size(); ++i) {
            expert_swiglu(experts[i], x, n_rows, ys[i], pool, activations);
        }
        return;
    }
    const auto inter = static_cast<size_t>(first.gate.rows);
    const auto block = inter * static_cast<size_t>(n_rows);
    // [gate, up] per expert, then each expert's h = silu(g) ⊙ u in place of g.
    std::vector<float> gu(2 * experts.size() * block);
    std::vector<const AffineMatrix*> ws;
    std::vector<float*> outputs;
    for (size_t i = 0; i < experts.size(); ++i) {
        ws.push_back(&experts[i].gate);
        ws.push_back(&experts[i].up);
        outputs.push_back(gu.data() + 2 * i * block);
        outputs.push_back(gu.data() + (2 * i + 1) * block);
    }
    matmul_shared_input(ws, x, static_cast<size_t>(first.gate.cols), n_rows, outputs, pool,
                        activations);
    std::vector<const float*> hs;
    ws.clear();
    for (size_t i = 0; i < experts.size(); ++i) {
        float* g = gu.data() + 2 * i * block;
        const float* u = g + block;
        for (size_t j = 0; j < block; ++j) g[j] = silu(g[j]) * u[j];
        hs.push_back(g);
        ws.push_back(&experts[i].down);
    }
    matmul_each_input(ws, hs, n_rows, ys, pool, activations);
}

}  // namespace cherenkov::engine
