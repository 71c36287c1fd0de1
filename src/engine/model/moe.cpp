// The MoE block (docs/qwen4_exp.md §3.7): softmax router, top-k with renormalization, routed
// experts from the ExpertSource (the union of all rows' choices, computed as each record becomes
// ready, rows grouped per expert), and the gated shared expert.
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/routing_trace.h"
#include "engine/model/layers.h"

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
    weights.router.apply(mix, n_rows, logits.data(), ctx.pool);
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

// Union of the rows' experts, each with its largest routing weight, strongest first.
std::vector<ExpertRequest> union_of(const Routing& r) {
    std::vector<ExpertRequest> requests;
    for (size_t i = 0; i < r.experts.size(); ++i) {
        auto it = std::find_if(requests.begin(), requests.end(),
                               [&](const ExpertRequest& q) { return q.expert == r.experts[i]; });
        if (it == requests.end()) {
            requests.push_back({r.experts[i], r.weights[i]});
        } else {
            it->max_weight = std::max(it->max_weight, r.weights[i]);
        }
    }
    std::stable_sort(
        requests.begin(), requests.end(),
        [](const ExpertRequest& a, const ExpertRequest& b) { return a.max_weight > b.max_weight; });
    return requests;
}

// SwiGLU MLP on n rows: down(silu(gate(x)) · up(x)).
void swiglu(const Linear& gate, const Linear& up, const Linear& down, const float* x,
            int64_t n_rows, float* y, ThreadPool* pool) {
    const int64_t inter = gate.out_features();
    std::vector<float> g(static_cast<size_t>(n_rows * inter));
    std::vector<float> u(static_cast<size_t>(n_rows * inter));
    gate.apply(x, n_rows, g.data(), pool);
    up.apply(x, n_rows, u.data(), pool);
    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
    down.apply(g.data(), n_rows, y, pool);
}

Linear as_linear(const AffineMatrix& m) {
    Linear l;
    l.quantized = true;
    l.affine = m;
    return l;
}

}  // namespace

void moe_forward(const MoeWeights& weights, const MoeWeights* next, const float* mix,
                 int64_t n_rows, float* y, const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t h = c.hidden_size;
    const int64_t top = c.num_experts_per_tok;
    const Routing routing = route(weights, mix, n_rows, ctx, true);
    const std::vector<ExpertRequest> requests = union_of(routing);
    if (ctx.routing_trace != nullptr) {
        write_trace_layer(*ctx.routing_trace, ctx.trace_step, weights.table_layer, top,
                          routing.experts, routing.weights);
    }

    // Lookahead: the next layer's router on these rows predicts its experts. Given before this
    // layer's fetch, so the source can queue those reads behind this layer's misses.
    if (next != nullptr) {
        const Routing predicted = route(*next, mix, n_rows, ctx, false);
        std::vector<int32_t> experts;
        for (const ExpertRequest& q : union_of(predicted)) experts.push_back(q.expert);
        ctx.experts->predict(next->table_layer, experts);
    }

    // Shared expert first (no IO).
    std::vector<float> shared(static_cast<size_t>(n_rows * h));
    swiglu(weights.shared_gate, weights.shared_up, weights.shared_down, mix, n_rows, shared.data(),
           ctx.pool);
    ctx.record("moe.shared_out", shared.data(), n_rows * h);
    std::vector<float> shared_gate(static_cast<size_t>(n_rows));
    weights.shared_expert_gate.apply(mix, n_rows, shared_gate.data(), ctx.pool);

    // Routed experts, in groups the source can pin at once; each expert is computed on the rows
    // that chose it as soon as its record is ready. Outputs are kept per (row, slot) and summed
    // afterwards in a fixed order.
    std::vector<float> outputs(static_cast<size_t>(n_rows * top * h), 0.0F);
    std::vector<char> delivered(static_cast<size_t>(n_rows * top), 0);
    std::vector<float> rows_in;
    std::vector<float> rows_out;
    std::vector<int64_t> slots;
    const size_t group = std::max<size_t>(ctx.experts->max_batch_experts(), 1);
    for (size_t first = 0; first < requests.size(); first += group) {
        const std::span<const ExpertRequest> part =
            std::span(requests).subspan(first, std::min(group, requests.size() - first));
        std::unique_ptr<ExpertBatch> batch = ctx.experts->fetch(weights.table_layer, part);
        size_t index = 0;
        ExpertWeights expert;
        while (batch->next(&index, &expert)) {
            const int32_t id = part[index].expert;
            slots.clear();
            for (int64_t i = 0; i < n_rows * top; ++i) {
                if (routing.experts[static_cast<size_t>(i)] == id) slots.push_back(i);
            }
            const auto n = static_cast<int64_t>(slots.size());
            rows_in.resize(static_cast<size_t>(n * h));
            for (int64_t i = 0; i < n; ++i) {
                const float* src = mix + (slots[static_cast<size_t>(i)] / top) * h;
                std::copy(src, src + h, rows_in.begin() + i * h);
            }
            rows_out.resize(static_cast<size_t>(n * h));
            swiglu(as_linear(expert.gate), as_linear(expert.up), as_linear(expert.down),
                   rows_in.data(), n, rows_out.data(), ctx.pool);
            for (int64_t i = 0; i < n; ++i) {
                const int64_t slot = slots[static_cast<size_t>(i)];
                std::copy(rows_out.begin() + i * h, rows_out.begin() + (i + 1) * h,
                          outputs.begin() + slot * h);
                delivered[static_cast<size_t>(slot)] = 1;
            }
        }
    }

    // routed = Σ w_e · y_e in increasing expert index (the reference's order).
    std::vector<float> routed(static_cast<size_t>(n_rows * h), 0.0F);
    std::vector<int64_t> by_expert(static_cast<size_t>(top));
    for (int64_t t = 0; t < n_rows; ++t) {
        std::iota(by_expert.begin(), by_expert.end(), t * top);
        std::sort(by_expert.begin(), by_expert.end(), [&](int64_t a, int64_t b) {
            return routing.experts[static_cast<size_t>(a)] <
                   routing.experts[static_cast<size_t>(b)];
        });
        float* out = routed.data() + t * h;
        for (int64_t slot : by_expert) {
            if (!delivered[static_cast<size_t>(slot)]) continue;  // cut by the source (--cut-weak)
            const float w = routing.weights[static_cast<size_t>(slot)];
            const float* ye = outputs.data() + slot * h;
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
