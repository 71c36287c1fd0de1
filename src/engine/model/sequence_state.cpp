#include "engine/model/sequence_state.h"

#include <algorithm>

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

void AttentionCache::truncate(int64_t n, int64_t compress_ratio) {
    if (n >= length) return;
    length = n;
    keys.resize(static_cast<size_t>(n * kv_width));
    values.resize(static_cast<size_t>(n * kv_width));
    index_keys.resize(static_cast<size_t>(n * index_width));
    if (compress_ratio > 0) {
        n_block_keys = std::min(n_block_keys, n / compress_ratio);
        block_keys.resize(static_cast<size_t>(n_block_keys * index_width));
    }
}

namespace {

template <typename T>
uint64_t vector_bytes(const std::vector<T>& v) {
    return v.capacity() * sizeof(T);
}

uint64_t layer_bytes(const LayerState& s) {
    return vector_bytes(s.gdn.conv) + vector_bytes(s.gdn.recurrent) + vector_bytes(s.ple.conv) +
           vector_bytes(s.attention.keys) + vector_bytes(s.attention.values) +
           vector_bytes(s.attention.index_keys) + vector_bytes(s.attention.block_keys);
}

LayerState make_layer_state(const q4::Config& c, q4::LayerType type, bool has_ple,
                            int64_t max_ctx) {
    LayerState s;
    if (type == q4::LayerType::LinearAttention) {
        s.gdn.conv.assign(static_cast<size_t>((c.linear_conv_kernel_dim - 1) * c.conv_dim), 0.0F);
        s.gdn.recurrent.assign(static_cast<size_t>(c.linear_num_value_heads *
                                                   c.linear_key_head_dim * c.linear_value_head_dim),
                               0.0F);
    } else {
        const auto kv = static_cast<size_t>(c.num_key_value_heads * c.head_dim);
        s.attention.kv_width = static_cast<int64_t>(kv);
        s.attention.index_width = c.indexer ? c.indexer->head_dim : 0;
        const auto reserve = static_cast<size_t>(std::max<int64_t>(max_ctx, 1));
        s.attention.keys.reserve(reserve * kv);
        s.attention.values.reserve(reserve * kv);
        if (c.indexer) {
            const auto di = static_cast<size_t>(c.indexer->head_dim);
            s.attention.index_keys.reserve(reserve * di);
            // Block keys too, so a full context allocates nothing more (sequence_state_bytes).
            const auto ratio = static_cast<size_t>(std::max<int64_t>(c.indexer->compress_ratio, 1));
            s.attention.block_keys.reserve(reserve / ratio * di);
        }
    }
    if (has_ple) {
        s.ple.conv.assign(static_cast<size_t>(c.ple_conv_state_len * c.hc_width()), 0.0F);
    }
    return s;
}

}  // namespace

uint64_t SequenceState::bytes() const {
    uint64_t total = vector_bytes(tokens) + vector_bytes(pending_residuals);
    for (const LayerState& s : layers) total += layer_bytes(s);
    for (const LayerState& s : mtp_layers) total += layer_bytes(s);
    for (const RowSnapshot& r : row_snapshots) {
        for (const auto& g : r.gdn) total += vector_bytes(g.conv) + vector_bytes(g.recurrent);
        for (const auto& p : r.ple) total += vector_bytes(p.conv);
    }
    if (backend) total += backend.get()->bytes();
    return total;
}

SequenceState make_sequence_state(const q4::Config& c, int64_t max_ctx, int64_t n_mtp_layers) {
    SequenceState s;
    if (c.has_ple())
        s.ngram_context.assign(static_cast<size_t>(c.ngram_context_len), c.first_eos());
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const bool has_ple = c.ple_layer_index[static_cast<size_t>(l)].has_value();
        s.layers.push_back(
            make_layer_state(c, c.layer_types[static_cast<size_t>(l)], has_ple, max_ctx));
    }
    for (int64_t i = 0; i < n_mtp_layers; ++i) {
        s.mtp_layers.push_back(
            make_layer_state(c, q4::LayerType::QwenSparseAttention, false, max_ctx));
    }
    s.tokens.reserve(static_cast<size_t>(std::max<int64_t>(max_ctx, 1)));
    return s;
}

}  // namespace cherenkov::engine
