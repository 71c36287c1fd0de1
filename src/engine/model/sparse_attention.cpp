// QSA attention (docs/qwen4_exp.md §3.6): the indexer scores completed blocks of r tokens with
// pooled, normalized, rotated keys; each query attends to its top-K blocks plus the incomplete
// tail block, with a sigmoid output gate per head. Without indexer fields it is plain causal
// attention (the engine extension of §1.3).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/layers.h"

namespace cherenkov::engine {

namespace {

// kB_b for every block completed within the cache's length that is not cached yet.
void complete_block_keys(const SparseAttentionWeights& weights, AttentionCache& cache,
                         int64_t n_blocks, const LayerContext& ctx) {
    const auto& ix = *ctx.config->indexer;
    const int64_t di = ix.head_dim;
    const int64_t r = ix.compress_ratio;
    cache.block_keys.resize(static_cast<size_t>(n_blocks * di));
    std::vector<float> pooled(static_cast<size_t>(di));
    for (int64_t b = cache.n_block_keys; b < n_blocks; ++b) {
        std::fill(pooled.begin(), pooled.end(), 0.0F);
        for (int64_t j = b * r; j < (b + 1) * r; ++j) {
            const float* k = cache.index_keys.data() + j * di;
            for (int64_t i = 0; i < di; ++i) pooled[static_cast<size_t>(i)] += k[i];
        }
        for (float& v : pooled) v /= static_cast<float>(r);
        float* out = cache.block_keys.data() + b * di;
        rms_norm(pooled.data(), weights.index_k_norm, di, ctx.eps(), out);
        ctx.rope->apply(out, b * r);
    }
    cache.n_block_keys = std::max(cache.n_block_keys, n_blocks);
}

// The selected token positions of a query at `position` (ascending). `margin` receives the
// K-th minus the (K+1)-th block score (+inf when every block is selected), so tests can skip
// selections that are ties.
void select_tokens(const SparseAttentionWeights& weights, const AttentionCache& cache,
                   const float* index_queries, int64_t position, const LayerContext& ctx,
                   std::vector<int64_t>& tokens, std::vector<float>& scores,
                   std::vector<int64_t>& order, float* margin, float* selected) {
    tokens.clear();
    *margin = std::numeric_limits<float>::infinity();
    const int64_t top = ctx.config->block_topk;
    if (selected != nullptr) std::fill(selected, selected + top, -1.0F);
    const auto& c = *ctx.config;
    if (!weights.has_indexer) {
        for (int64_t j = 0; j <= position; ++j) tokens.push_back(j);
        return;
    }
    const auto& ix = *c.indexer;
    const int64_t r = ix.compress_ratio;
    const int64_t n_blocks = (position + 1) / r;
    if (n_blocks <= top) {
        for (int64_t j = 0; j <= position; ++j) tokens.push_back(j);
        for (int64_t b = 0; b < n_blocks && selected != nullptr; ++b)
            selected[b] = static_cast<float>(b);
        return;
    }
    const int64_t di = ix.head_dim;
    const float scale = 1.0F / std::sqrt(static_cast<float>(di));
    scores.assign(static_cast<size_t>(n_blocks), 0.0F);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const float* kb = cache.block_keys.data() + b * di;
        float sum = 0.0F;
        for (int64_t h = 0; h < ix.n_heads; ++h) {
            const float* q = index_queries + h * di;
            float dot = 0.0F;
            for (int64_t i = 0; i < di; ++i) dot += q[i] * kb[i];
            sum += std::max(dot, 0.0F);
        }
        scores[static_cast<size_t>(b)] = sum * scale;
    }
    order.resize(static_cast<size_t>(n_blocks));
    std::iota(order.begin(), order.end(), 0);
    // Larger score first; on an exact tie the smaller block index.
    std::partial_sort(order.begin(), order.begin() + top + 1, order.end(),
                      [&](int64_t a, int64_t b) {
                          const float sa = scores[static_cast<size_t>(a)];
                          const float sb = scores[static_cast<size_t>(b)];
                          return sa != sb ? sa > sb : a < b;
                      });
    *margin = scores[static_cast<size_t>(order[static_cast<size_t>(top - 1)])] -
              scores[static_cast<size_t>(order[static_cast<size_t>(top)])];
    std::sort(order.begin(), order.begin() + top);
    for (int64_t i = 0; i < top; ++i) {
        const int64_t b = order[static_cast<size_t>(i)];
        if (selected != nullptr) selected[i] = static_cast<float>(b);
        for (int64_t j = b * r; j < (b + 1) * r; ++j) tokens.push_back(j);
    }
    for (int64_t j = n_blocks * r; j <= position; ++j) tokens.push_back(j);
}

}  // namespace

void sparse_attention_forward(const SparseAttentionWeights& weights, AttentionCache& cache,
                              const float* mix, int64_t n_rows, int64_t first_position, float* y,
                              const LayerContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t n_heads = c.num_attention_heads;
    const int64_t n_kv = c.num_key_value_heads;
    const int64_t d = c.head_dim;
    const int64_t group = n_heads / n_kv;
    const int64_t kv_width = n_kv * d;
    if (cache.length != first_position) {
        throw_internal("attention cache holds " + std::to_string(cache.length) +
                       " tokens, the call starts at position " + std::to_string(first_position));
    }

    // Indexer queries and raw keys.
    std::vector<float> index_queries;
    if (weights.has_indexer) {
        const auto& ix = *c.indexer;
        const int64_t di = ix.head_dim;
        const int64_t qk_width = (ix.n_heads + 1) * di;
        std::vector<float> qk(static_cast<size_t>(n_rows * qk_width));
        // Block selection is a discrete choice, like routing: float activations always.
        weights.index_qk.apply(mix, n_rows, qk.data(), ctx.pool, ActivationPrecision::F32);
        index_queries.resize(static_cast<size_t>(n_rows * ix.n_heads * di));
        for (int64_t t = 0; t < n_rows; ++t) {
            for (int64_t h = 0; h < ix.n_heads; ++h) {
                float* q = index_queries.data() + (t * ix.n_heads + h) * di;
                rms_norm(qk.data() + t * qk_width + h * di, weights.index_q_norm, di, ctx.eps(), q);
                ctx.rope->apply(q, first_position + t);
            }
            const float* kraw = qk.data() + t * qk_width + ix.n_heads * di;
            cache.index_keys.insert(cache.index_keys.end(), kraw, kraw + di);
        }
    }

    // Queries (with gates), keys and values.
    std::vector<float> qg(static_cast<size_t>(n_rows * n_heads * 2 * d));
    weights.q.apply(mix, n_rows, qg.data(), ctx.pool, ctx.activations);
    std::vector<float> k(static_cast<size_t>(n_rows * kv_width));
    weights.k.apply(mix, n_rows, k.data(), ctx.pool, ctx.activations);
    std::vector<float> v(static_cast<size_t>(n_rows * kv_width));
    weights.v.apply(mix, n_rows, v.data(), ctx.pool, ctx.activations);
    for (int64_t t = 0; t < n_rows; ++t) {
        const int64_t position = first_position + t;
        for (int64_t h = 0; h < n_heads; ++h) {
            float* q = qg.data() + (t * n_heads + h) * 2 * d;
            rms_norm(q, weights.q_norm, d, ctx.eps(), q);
            ctx.rope->apply(q, position);
        }
        for (int64_t g = 0; g < n_kv; ++g) {
            float* kg = k.data() + t * kv_width + g * d;
            rms_norm(kg, weights.k_norm, d, ctx.eps(), kg);
            ctx.rope->apply(kg, position);
        }
    }
    cache.keys.insert(cache.keys.end(), k.begin(), k.end());
    cache.values.insert(cache.values.end(), v.begin(), v.end());
    cache.length += n_rows;
    if (weights.has_indexer) {
        complete_block_keys(weights, cache, cache.length / c.indexer->compress_ratio, ctx);
    }

    // Each row attends over its selected tokens; rows are independent.
    std::vector<float> gated(static_cast<size_t>(n_rows * n_heads * d));
    std::vector<float> margins(static_cast<size_t>(n_rows));
    const int64_t top = c.block_topk;
    std::vector<float> selections(
        ctx.trace != nullptr && weights.has_indexer ? static_cast<size_t>(n_rows * top) : 0);
    const float scale = 1.0F / std::sqrt(static_cast<float>(d));
    const int64_t n_index_heads = weights.has_indexer ? c.indexer->n_heads : 0;
    const int64_t di = weights.has_indexer ? c.indexer->head_dim : 0;
    ctx.pool->parallel_for(static_cast<size_t>(n_rows), 1, [&](size_t begin, size_t end) {
        std::vector<int64_t> tokens;
        std::vector<float> scores;
        std::vector<int64_t> order;
        std::vector<float> probs;
        for (size_t tt = begin; tt < end; ++tt) {
            const auto t = static_cast<int64_t>(tt);
            const int64_t position = first_position + t;
            const float* iq =
                weights.has_indexer ? index_queries.data() + t * n_index_heads * di : nullptr;
            select_tokens(weights, cache, iq, position, ctx, tokens, scores, order, &margins[tt],
                          selections.empty() ? nullptr : selections.data() + t * top);
            probs.resize(tokens.size());
            for (int64_t h = 0; h < n_heads; ++h) {
                const float* q = qg.data() + (t * n_heads + h) * 2 * d;
                const float* gate = q + d;
                const int64_t g = h / group;
                for (size_t i = 0; i < tokens.size(); ++i) {
                    const float* kj = cache.keys.data() + tokens[i] * kv_width + g * d;
                    float dot = 0.0F;
                    for (int64_t e = 0; e < d; ++e) dot += q[e] * kj[e];
                    probs[i] = dot * scale;
                }
                softmax(probs.data(), static_cast<int64_t>(probs.size()));
                float* o = gated.data() + (t * n_heads + h) * d;
                std::fill(o, o + d, 0.0F);
                for (size_t i = 0; i < tokens.size(); ++i) {
                    const float* vj = cache.values.data() + tokens[i] * kv_width + g * d;
                    for (int64_t e = 0; e < d; ++e) o[e] += probs[i] * vj[e];
                }
                for (int64_t e = 0; e < d; ++e) o[e] *= sigmoid(gate[e]);
            }
        }
    });
    ctx.record("qsa.margin", margins.data(), n_rows);
    if (!selections.empty()) ctx.record("qsa.selected_blocks", selections.data(), n_rows * top);
    weights.o.apply(gated.data(), n_rows, y, ctx.pool, ctx.activations);
}

}  // namespace cherenkov::engine
