// The host side of the MoE block's expert policy (docs/qwen4_exp.md §3.7), written once for every
// backend: which experts a layer asks its ExpertSource for and in what order (union_of), how a
// large union is fetched in groups the source can pin (fetch_in_groups), what the next layer is
// predicted to use (predict_next), and in which order each row's expert outputs are summed
// (slots_in_expert_order). The backends differ only in what they do with a delivered record: the
// CPU computes it at once, the CUDA backend copies it to its device pool and queues kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

// The union of the rows' experts, each with the largest routing weight any row gave it, strongest
// first; an exact tie keeps the order of first appearance. experts, weights: the router's [T, k]
// (row-major, as the router writes them).
std::vector<ExpertRequest> union_of(std::span<const int32_t> experts,
                                    std::span<const float> weights);

// What fetch_in_groups does with a fetch: a backend overrides deliver() and the hooks it needs.
// Each group's calls come in this order:
//   begin_group, then per record: [before_blocking_wait, before_wait, after_wait,] deliver; then a
//   last [before_blocking_wait, before_wait, after_wait] (the wait that finds the group done),
//   end_group, and release_group. The bracketed hooks come only where the batch could not say
//   that the record (or the end) is ready (ExpertBatch::ready): a wait that may block.
// After an early stop (deliver returns false) or an exception, release_group still runs (and
// end_group does not), always while the group's batch (and its records) are alive.
class ExpertReceiver {
public:
    virtual ~ExpertReceiver() = default;

    // One delivered record; `request` is its entry in the fetched requests. The record is valid
    // until release_group() returns. Returns false to stop: no later record or group is fetched.
    virtual bool deliver(const ExpertRequest& request, const ExpertWeights& weights) = 0;

    // A group's fetch has started (its batch exists).
    virtual void begin_group() {}
    // Before a wait for the group's next record that may block (a read still in flight): work on
    // the records delivered so far is best done now, while the host would otherwise sit idle.
    virtual void before_blocking_wait() {}
    // Around each wait for the group's next record that may block (ExpertBatch::next).
    virtual void before_wait() {}
    virtual void after_wait() {}
    // Every record of the group has been delivered (cut requests aside); work that reads the
    // records can be finished here.
    virtual void end_group() {}
    // The group's batch is about to be destroyed, on every path (the scope-guard place for fences
    // that must drop the group's pins).
    virtual void release_group() noexcept {}
};

// Fetches `requests` of table layer `layer` from `source` in groups of at most
// source.max_batch_experts() (one group when the source is unbounded), in the order given, and
// hands every delivered record to `receiver`. Requests the source cuts (ExpertBatch::
// cut_requests) are never delivered. Returns false when the receiver stopped early.
bool fetch_in_groups(ExpertSource& source, int64_t layer, std::span<const ExpertRequest> requests,
                     ExpertReceiver& receiver);

// The lookahead: tells `source` that table layer `layer` will probably use the union of the rows'
// routing (experts, weights: the next layer's router on this layer's rows, [T, k]), strongest
// first, less the experts `needs_read` returns false for (e.g. already on the device); a null
// `needs_read` keeps all.
void predict_next(ExpertSource& source, int64_t layer, std::span<const int32_t> experts,
                  std::span<const float> weights,
                  const std::function<bool(int32_t)>& needs_read = {});

// The order in which a row's routed outputs are summed: for each row t of the router's [T, top]
// `experts`, its slot indices t·top + j ordered by increasing expert index (the reference's
// order, independent of delivery order). Returns [T, top] slot indices.
std::vector<int64_t> slots_in_expert_order(std::span<const int32_t> experts, int64_t top);

}  // namespace cherenkov::engine
