// The MoE block (docs/qwen4_exp.md §3.7): softmax router, top-k with renormalization, routed
// experts from the ExpertSource (the union of all rows' choices, computed as each record becomes
// ready, rows grouped per expert), and the gated shared expert. Which experts are fetched, in what
// groups and order, what is predicted and the order of the sum are moe_policy.h's, shared with the
// CUDA backend.
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/routing_trace.h"
#include "engine/model/expert_swiglu.h"
#include "engine/model/layers.h"
#include "engine/model/moe_policy.h"

namespace cherenkov::engine {

namespace {

struct Routing {
    std::vector<int32_t> experts;  // [T, k], descending weight
    std::vector<float> weights;    // [T, k]
};

Routing route(const MoeWeights& weights, const float* mix, int64_t n_rows, const LayerContext& ctx,
              bool record) {
    const auto& c = *ctx.config;
    const int64_t n_experts = c.num_experts;
    const int64_t top = c.num_experts_per_tok;
    std::vector<float> logits(static_cast<size_t>(n_rows * n_experts));
    // Routing is a discrete choice on small margins: its matmul keeps float activations
    // whatever the rest use (a flipped expert moves the output far more than rounding does).
    weights.router.apply(mix, n_rows, logits.data(), ctx.pool, ActivationPrecision::F32);
    if (record) ctx.record("moe.router_logits", logits.data(), n_rows * n_experts);
    Routing r;
    r.experts.resize(static_cast<size_t>(n_rows * top));
    r.weights.resize(static_cast<size_t>(n_rows * top));
    std::vector<int32_t> order(static_cast<size_t>(n_experts));
    std::vector<float> margins(static_cast<size_t>(n_rows), std::numeric_limits<float>::infinity());
    for (int64_t t = 0; t < n_rows; ++t) {
        float* p = logits.data() + t * n_experts;
        softmax(p, n_experts);
        std::iota(order.begin(), order.end(), 0);
        const int64_t sorted = std::min(top + 1, n_experts);
        std::partial_sort(order.begin(), order.begin() + sorted, order.end(),
                          [&](int32_t a, int32_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
        // (k-th − (k+1)-th probability) / k-th: selections at a tie are implementation-defined.
        if (top < n_experts) {
            const float kth = p[order[static_cast<size_t>(top - 1)]];
            margins[static_cast<size_t>(t)] = (kth - p[order[static_cast<size_t>(top)]]) / kth;
        }
        float sum = 0.0F;
        for (int64_t i = 0; i < top; ++i) sum += p[order[static_cast<size_t>(i)]];
        for (int64_t i = 0; i < top; ++i) {
            const int32_t e = order[static_cast<size_t>(i)];
            r.experts[static_cast<size_t>(t * top + i)] = e;
            r.weights[static_cast<size_t>(t * top + i)] = c.norm_topk_prob ? p[e] / sum : p[e];
        }
    }
    if (record) ctx.record("moe.margin", margins.data(), n_rows);
    return r;
}

// Rows of a call whose delivered experts are computed together (experts_swiglu) on all of them:
// a decode step with its drafts. The weights are read once whatever the rows, each row's result
// does not depend on the other rows of its call (matmul_kernels.h), and one pool operation for
// all gates and ups and one for all downs make longer streams than two an expert.
constexpr int64_t kBatchedRows = 4;

// Delivered experts computed into per-(row, slot) outputs that are summed afterwards in a fixed
// order. Prefill calls compute each expert on the rows that chose it as soon as its record is
// ready. Decode calls keep the delivered records and compute them together on every row before
// the source would make the host wait for a read (ExpertReceiver::before_blocking_wait) and at
// the group's end, so records already at hand never wait behind a read.
class RoutedOutputs final : public ExpertReceiver {
public:
    RoutedOutputs(const Routing& routing, const float* mix, int64_t n_rows, int64_t top,
                  int64_t hidden, ThreadPool* pool, ActivationPrecision activations)
        : routing_(routing),
          mix_(mix),
          n_rows_(n_rows),
          n_slots_(n_rows * top),
          top_(top),
          hidden_(hidden),
          pool_(pool),
          activations_(activations),
          outputs_(static_cast<size_t>(n_rows * top * hidden), 0.0F),
          delivered_(static_cast<size_t>(n_rows * top), 0) {}

    bool deliver(const ExpertRequest& request, const ExpertWeights& expert) override {
        if (n_rows_ <= kBatchedRows) {
            pending_.push_back(expert);
            pending_experts_.push_back(request.expert);
            return true;
        }
        const int64_t h = hidden_;
        slots_of(request.expert);
        const auto n = static_cast<int64_t>(slots_.size());
        rows_in_.resize(static_cast<size_t>(n * h));
        for (int64_t i = 0; i < n; ++i) {
            const float* src = mix_ + (slots_[static_cast<size_t>(i)] / top_) * h;
            std::copy(src, src + h, rows_in_.begin() + i * h);
        }
        rows_out_.resize(static_cast<size_t>(n * h));
        expert_swiglu(expert, rows_in_.data(), n, rows_out_.data(), pool_, activations_);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t slot = slots_[static_cast<size_t>(i)];
            std::copy(rows_out_.begin() + i * h, rows_out_.begin() + (i + 1) * h,
                      outputs_.begin() + slot * h);
            delivered_[static_cast<size_t>(slot)] = 1;
        }
        return true;
    }
    void before_blocking_wait() override { compute_pending(); }
    void end_group() override { compute_pending(); }
    // The pending records go with their batch (an early stop or an error).
    void release_group() noexcept override {
        pending_.clear();
        pending_experts_.clear();
    }

    // Whether (row, slot) index `slot`'s expert was delivered (not cut by the source).
    bool delivered(int64_t slot) const { return delivered_[static_cast<size_t>(slot)] != 0; }
    const float* output(int64_t slot) const { return outputs_.data() + slot * hidden_; }

private:
    // slots_ = the (row, slot) indices that chose `expert`.
    void slots_of(int32_t expert) {
        slots_.clear();
        for (int64_t i = 0; i < n_slots_; ++i) {
            if (routing_.experts[static_cast<size_t>(i)] == expert) slots_.push_back(i);
        }
    }

    void compute_pending() {
        if (pending_.empty()) return;
        const int64_t h = hidden_;
        const auto block = static_cast<size_t>(n_rows_ * h);
        rows_out_.resize(pending_.size() * block);
        std::vector<float*> ys;
        for (size_t i = 0; i < pending_.size(); ++i) ys.push_back(rows_out_.data() + i * block);
        experts_swiglu(pending_, mix_, n_rows_, ys, pool_, activations_);
        for (size_t i = 0; i < pending_.size(); ++i) {
            slots_of(pending_experts_[i]);
            for (const int64_t slot : slots_) {
                const float* row = ys[i] + (slot / top_) * h;
                std::copy(row, row + h, outputs_.begin() + slot * h);
                delivered_[static_cast<size_t>(slot)] = 1;
            }
        }
        pending_.clear();
        pending_experts_.clear();
    }

    const Routing& routing_;
    const float* mix_;
    int64_t n_rows_;
    int64_t n_slots_;
    int64_t top_;
    int64_t hidden_;
    ThreadPool* pool_;
    ActivationPrecision activations_;
    std::vector<float> outputs_;   // [T·k, H]
    std::vector<char> delivered_;  // [T·k]
    std::vector<float> rows_in_;
    std::vector<float> rows_out_;
    std::vector<int64_t> slots_;
    // Decode: delivered records not computed yet, and their experts.
    std::vector<ExpertWeights> pending_;
    std::vector<int32_t> pending_experts_;
};

}  // namespace

void moe_forward(const MoeWeights& weights, const MoeWeights* next, const float* mix,
                 int64_t n_rows, float* y, const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t top = c.num_experts_per_tok;
    const Routing routing = route(weights, mix, n_rows, ctx, true);
    const std::vector<ExpertRequest> requests = union_of(routing.experts, routing.weights);
    if (ctx.routing_trace != nullptr) {
        write_trace_layer(*ctx.routing_trace, ctx.trace_step, weights.table_layer, top,
                          routing.experts, routing.weights);
    }

    // Lookahead: the next layer's router on these rows predicts its experts. Given before this
    // layer's fetch, so the source can queue those reads behind this layer's misses.
    if (next != nullptr) {
        const Routing predicted = route(*next, mix, n_rows, ctx, false);
        predict_next(*ctx.experts, next->table_layer, predicted.experts, predicted.weights);
    }

    // Shared expert first (no IO).
    std::vector<float> shared(static_cast<size_t>(n_rows * h));
    swiglu(weights.shared_gate, weights.shared_up, weights.shared_down, mix, n_rows, shared.data(),
           ctx.pool, ctx.activations);
    ctx.record("moe.shared_out", shared.data(), n_rows * h);
    std::vector<float> shared_gate(static_cast<size_t>(n_rows));
    weights.shared_expert_gate.apply(mix, n_rows, shared_gate.data(), ctx.pool, ctx.activations);

    // Routed experts, in groups the source can pin at once; each expert is computed on the rows
    // that chose it as soon as its record is ready. Outputs are kept per (row, slot) and summed
    // afterwards in a fixed order.
    RoutedOutputs routed_outputs(routing, mix, n_rows, top, h, ctx.pool, ctx.activations);
    fetch_in_groups(*ctx.experts, weights.table_layer, requests, routed_outputs);

    // routed = Σ w_e · y_e in increasing expert index (the reference's order).
    std::vector<float> routed(static_cast<size_t>(n_rows * h), 0.0F);
    const std::vector<int64_t> order = slots_in_expert_order(routing.experts, top);
    for (int64_t t = 0; t < n_rows; ++t) {
        float* out = routed.data() + t * h;
        for (int64_t m = 0; m < top; ++m) {
            const int64_t slot = order[static_cast<size_t>(t * top + m)];
            if (!routed_outputs.delivered(slot)) continue;  // cut by the source (--cut-weak)
            const float w = routing.weights[static_cast<size_t>(slot)];
            const float* ye = routed_outputs.output(slot);
            for (int64_t d = 0; d < h; ++d) out[d] += w * ye[d];
        }
    }
    ctx.record("moe.routed_out", routed.data(), n_rows * h);
    for (int64_t t = 0; t < n_rows; ++t) {
        const float g = sigmoid(shared_gate[static_cast<size_t>(t)]);
        for (int64_t d = 0; d < h; ++d) {
            y[t * h + d] =
                routed[static_cast<size_t>(t * h + d)] + g * shared[static_cast<size_t>(t * h + d)];
        }
    }
    ctx.record("moe.out", y, n_rows * h);
}

}  // namespace cherenkov::engine
