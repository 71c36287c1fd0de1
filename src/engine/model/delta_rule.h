// The delta-rule recurrence of Gated DeltaNet (docs/qwen4_exp.md §3.5) for one value head, on
// inputs already normalized and gated, token by token: the form the CPU layer runs, and so the
// oracle every other formulation (the CUDA chunked prefill) is tested against.
#pragma once

#include <cstdint>

namespace cherenkov::engine {

// One value head over T rows. Rows of q, k and v are `row_stride` floats apart (they are slices
// of the conv output [T, conv_dim]); gate values are `gate_stride` floats apart ([T, Hv]).
struct DeltaRuleInputs {
    int64_t n_rows = 0;
    int64_t dk = 0;
    int64_t dv = 0;
    const float* q = nullptr;  // q̂ [T, dk]: l2-normalized, scaled by 1/sqrt(dk)
    const float* k = nullptr;  // k̂ [T, dk]: l2-normalized
    const float* v = nullptr;  // v [T, dv]
    int64_t row_stride = 0;
    const float* log_decay = nullptr;  // g_t [T] (≤ 0): S decays by exp(g_t) before row t
    const float* beta = nullptr;       // β_t [T] in (0, 1)
    int64_t gate_stride = 0;
};

// Per row t, in this order:
//   S ← exp(g_t)·S;   u = β_t·(v_t − Sᵀk_t);   S ← S + k_t ⊗ u;   o_t = Sᵀq_t
// state: S [dk, dv], updated in place. out: o [T, dv], rows `out_stride` floats apart. When
// `snapshots` is not null, S after row t is copied to snapshots[t] ([dk, dv] each).
void delta_rule_sequential(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride,
                           float* const* snapshots);

// What the CPU layer runs: delta_rule_sequential's results bit for bit, eight value columns at a
// time unless the matmuls' kernel family is the portable one (set_kernel_path in
// engine/cpu/matmul.h; each element gets the same multiplies and adds in the same order;
// the decay is applied to a state row as the row is first read instead of in a pass of its own).
void delta_rule_tokens(const DeltaRuleInputs& in, float* state, float* out, int64_t out_stride,
                       float* const* snapshots);

}  // namespace cherenkov::engine
