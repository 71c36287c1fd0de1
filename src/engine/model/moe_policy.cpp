// The MoE block's host-side expert policy (moe_policy.h), shared by the CPU and CUDA backends.
#include "engine/model/moe_policy.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "base/error.h"

namespace cherenkov::engine {

std::vector<ExpertRequest> union_of(std::span<const int32_t> experts,
                                    std::span<const float> weights) {
    CHERENKOV_ASSERT(experts.size() == weights.size(), "one weight per routed expert");
    std::vector<ExpertRequest> requests;
    for (size_t i = 0; i < experts.size(); ++i) {
        auto it = std::find_if(requests.begin(), requests.end(),
                               [&](const ExpertRequest& q) { return q.expert == experts[i]; });
        if (it == requests.end()) {
            requests.push_back({experts[i], weights[i]});
        } else {
            it->max_weight = std::max(it->max_weight, weights[i]);
        }
    }
    // Stable: sources read in this order, and equal weights must not reorder between runs.
    std::stable_sort(
        requests.begin(), requests.end(),
        [](const ExpertRequest& a, const ExpertRequest& b) { return a.max_weight > b.max_weight; });
    return requests;
}

namespace {

// Calls release_group() when the group ends, however it ends; declared after the batch, so the
// receiver's fence runs before the batch (and its records) go.
class GroupRelease {
public:
    explicit GroupRelease(ExpertReceiver& receiver) : receiver_(receiver) {}
    GroupRelease(const GroupRelease&) = delete;
    GroupRelease& operator=(const GroupRelease&) = delete;
    ~GroupRelease() { receiver_.release_group(); }

private:
    ExpertReceiver& receiver_;
};

// One group: false when the receiver stopped.
bool fetch_group(ExpertSource& source, int64_t layer, std::span<const ExpertRequest> part,
                 ExpertReceiver& receiver) {
    const std::unique_ptr<ExpertBatch> batch = source.fetch(layer, part);
    const GroupRelease release(receiver);
    receiver.begin_group();
    size_t index = 0;
    ExpertWeights expert;
    while (true) {
        // A record at hand is taken without the wait hooks: nothing can block, and the CUDA
        // receiver's hooks record events (about 1 µs each, a dozen a layer with the table
        // mapped).
        const bool ready = batch->ready();
        if (!ready) {
            receiver.before_blocking_wait();
            receiver.before_wait();
        }
        const bool more = batch->next(&index, &expert);
        if (!ready) receiver.after_wait();
        if (!more) break;
        if (!receiver.deliver(part[index], expert)) return false;
    }
    receiver.end_group();
    return true;
}

}  // namespace

bool fetch_in_groups(ExpertSource& source, int64_t layer, std::span<const ExpertRequest> requests,
                     ExpertReceiver& receiver) {
    const size_t group = std::max<size_t>(source.max_batch_experts(), 1);
    for (size_t first = 0; first < requests.size(); first += group) {
        const std::span<const ExpertRequest> part =
            requests.subspan(first, std::min(group, requests.size() - first));
        if (!fetch_group(source, layer, part, receiver)) return false;
    }
    return true;
}

void predict_next(ExpertSource& source, int64_t layer, std::span<const int32_t> experts,
                  std::span<const float> weights, const std::function<bool(int32_t)>& needs_read) {
    std::vector<int32_t> predicted;
    for (const ExpertRequest& q : union_of(experts, weights)) {
        if (!needs_read || needs_read(q.expert)) predicted.push_back(q.expert);
    }
    source.predict(layer, predicted);
}

std::vector<int64_t> slots_in_expert_order(std::span<const int32_t> experts, int64_t top) {
    CHERENKOV_ASSERT(top >= 1 && experts.size() % static_cast<size_t>(top) == 0,
                     "experts is [T, top]");
    std::vector<int64_t> order(experts.size());
    const auto n_slots = static_cast<int64_t>(experts.size());
    for (int64_t row_start = 0; row_start < n_slots; row_start += top) {
        const auto first = order.begin() + row_start;
        std::iota(first, first + top, row_start);
        std::sort(first, first + top, [&](int64_t a, int64_t b) {
            return experts[static_cast<size_t>(a)] < experts[static_cast<size_t>(b)];
        });
    }
    return order;
}

}  // namespace cherenkov::engine
