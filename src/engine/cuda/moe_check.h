// Test support for the GPU MoE block (issue 9): runs engine::cuda::moe_forward on host inputs
// (upload, run with a DeviceExpertPool, download) so that tests, which must build with and
// without CUDA, need no CUDA header. Built from moe_check.cu with CUDA, or from
// moe_check_unavailable.cpp without it, where construction throws Unsupported.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

#include "engine/cuda/device_expert_pool.h"
#include "engine/experts/expert_source.h"
#include "engine/model/forward_trace.h"
#include "engine/model/model_weights.h"

namespace cherenkov::engine::cuda {

class MoeCheck {
public:
    // Copies `weights`' dense.bin to the device, translates every layer's MoE weights, and makes
    // a pool of `pool_slots` slots for `experts`' layout. Both must outlive the check.
    MoeCheck(const ModelWeights& weights, ExpertSource& experts, int64_t pool_slots);
    ~MoeCheck();
    MoeCheck(const MoeCheck&) = delete;
    MoeCheck& operator=(const MoeCheck&) = delete;

    // y [T, H] of moe_forward for trunk layer `layer` on mix [T, H], with layer + 1 as `next`
    // (lookahead) when `lookahead` and that layer exists. `trace` and `routing_trace` as in
    // DeviceContext (prefix "layers.<layer>."), `trace_step` numbers routing-trace lines.
    std::vector<float> run(int64_t layer, const std::vector<float>& mix, int64_t n_rows,
                           bool lookahead, ForwardTrace* trace = nullptr,
                           std::ostream* routing_trace = nullptr, int64_t trace_step = 0);

    const DeviceExpertPool& pool() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cherenkov::engine::cuda
