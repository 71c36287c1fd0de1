// A prefill call's routing grouped by expert on the device, for a layer the device pool holds
// whole: what RoutedExperts builds on the host after reading the routing back (the counting sort
// of the (row, slot) indices by expert, the token tiles of expert_gemm, the combine's part rows),
// built by one kernel, so the layer's MoE never waits for the host. Plain C++ API: device
// pointers, and a cudaStream_t passed as void*. Built from expert_grouping.cu with CUDA, or from
// unavailable.cpp without it.
#pragma once

#include <cstdint>

#include "engine/cuda/expert_gemm.h"

namespace cherenkov::engine::cuda {

// Where group_by_expert writes, all device memory. With T rows, top k and E experts:
struct DeviceExpertGroups {
    int32_t* slots = nullptr;          // [T·k]: the (row, slot) indices i = row·k + slot by expert
    ExpertTokenTile* tiles = nullptr;  // [max_expert_token_tiles(T·k, min(E, T·k))]
    int32_t* n_tiles = nullptr;        // [1]: the tiles written
    int32_t* part_rows = nullptr;      // [T, k]: row t's indices i in increasing expert index
    float* part_weights = nullptr;     // [T, k]: their routing weights
    unsigned long long* hits = nullptr;  // null, or += the distinct experts routed to
};

// Experts a call can group (the kernel keeps four ints per expert in shared memory).
constexpr int kMaxGroupedExperts = 2048;

// experts, weights: the router's [T, top] (distinct experts in [0, E) per row). A tile's
// `expert` is the expert index itself, so the layer's address map [E] is the GEMMs' table. Each
// expert's indices fill its tiles of kExpertTokenTile in order; which of an expert's tokens share
// a tile varies from call to call, which changes no output (expert_gemm.h: a token's result does
// not depend on the tokens beside it). The part rows are the prefill layout of moe_combine_kernel
// (part row = i), every row's k parts present.
void group_by_expert(const int32_t* experts, const float* weights, int64_t n_rows, int top,
                     int n_experts, const DeviceExpertGroups& out, void* stream);

}  // namespace cherenkov::engine::cuda
