// The routed experts of one decode MoE layer in one launch (Hopper, 4-bit codes in groups of 64;
// used by affine_gemv.cu, see affine_gemv.h for the format): gate/up with SwiGLU and down for
// every table entry, with the integer tensor cores and every weight asked for from the bulk copy
// engine at the launch's start (expert_layer_imma.cuh says how and why). Its bits differ from the
// bf16 tensor-core kernels', so the choice depends only on the shape and the device: every call of
// a shape at 1-4 rows takes this path or none does, and a row's result never depends on the other
// rows of the call. --tuning expert_layer=off turns it off (A/B runs).
//
// Two of these launches must never run at once on a device: a down item waits for gate/up items
// of other blocks, and with the multiprocessors shared between two launches' resident blocks
// neither might get the rest of its blocks in. Launches on one stream are safe (the next one's
// blocks start only once every block of the one before has, and wait for it to end); the engine
// keeps them all on its main stream. The launches on one stream also share the tagged copy of h
// that crosses blocks (expert_layer_imma.cuh, store_tagged) and the count its tags come from.
#pragma once

#include "engine/cuda/affine_gemv.h"

namespace cherenkov::engine::cuda {

// Whether the one-launch kernel takes `shape` at n_rows (1-4) on the current device.
bool layer_experts_take(const ExpertShape& shape, int n_rows);

// h[e][t] = silu(gate_e·x_t) ⊙ (up_e·x_t) and parts[e][t] = down_e·h[e][t] for e < n_experts (or
// *n_in_use, a device int written by an earlier kernel on `stream`), t < n_rows, in one launch.
// x: [n_rows, hidden]; h: [n_experts, n_rows, intermediate]; parts: [n_experts, n_rows, hidden].
// Every table pointer must be 16-byte aligned (device pool slots and cudaMalloc'd weights are).
void layer_experts_parts(const ExpertShape& shape, const ExpertAddress* table, int n_experts,
                         const float* x, int n_rows, float* h, float* parts, void* stream,
                         const int* n_in_use = nullptr);

}  // namespace cherenkov::engine::cuda
