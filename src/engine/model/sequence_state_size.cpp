#include "engine/model/sequence_state_size.h"

#include <algorithm>
#include <cstdint>

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

namespace {

// Saturating arithmetic: an absurd --max-ctx must give "too much", never a wrapped small figure.
uint64_t add(uint64_t a, uint64_t b) {
    uint64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}
uint64_t mul(uint64_t a, uint64_t b) {
    uint64_t product = 0;
    return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

// Floats of one attention cache (a QSA or MTP layer) holding `ctx` rows.
uint64_t attention_floats(const q4::Config& c, uint64_t ctx) {
    const auto kv = static_cast<uint64_t>(c.num_key_value_heads * c.head_dim);
    uint64_t floats = mul(2 * kv, ctx);  // keys and values
    if (c.indexer) {
        const auto di = static_cast<uint64_t>(c.indexer->head_dim);
        const auto ratio = static_cast<uint64_t>(std::max<int64_t>(c.indexer->compress_ratio, 1));
        floats = add(floats, add(mul(ctx, di), mul(ctx / ratio, di)));  // indexer, block keys
    }
    return floats;
}

// Floats of the states a rollback restores, per verified row: GDN conv and recurrent, PLE conv.
uint64_t rollback_floats(const q4::Config& c, int64_t layer) {
    uint64_t floats = 0;
    if (c.layer_types[static_cast<size_t>(layer)] == q4::LayerType::LinearAttention) {
        floats += static_cast<uint64_t>((c.linear_conv_kernel_dim - 1) * c.conv_dim);
        floats += static_cast<uint64_t>(c.linear_num_value_heads * c.linear_key_head_dim *
                                        c.linear_value_head_dim);
    }
    if (c.ple_layer_index[static_cast<size_t>(layer)].has_value())
        floats += static_cast<uint64_t>(c.ple_conv_state_len * c.hc_width());
    return floats;
}

}  // namespace

uint64_t sequence_state_bytes(const q4::Config& c, int64_t max_ctx, int64_t n_mtp_layers,
                              int64_t snapshot_rows) {
    // make_sequence_state reserves at least one row.
    const auto ctx = static_cast<uint64_t>(std::max<int64_t>(max_ctx, 1));
    uint64_t floats = 0;
    uint64_t snapshot_floats = 0;
    for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
        const uint64_t rollback = rollback_floats(c, layer);
        floats += rollback;
        snapshot_floats += rollback;
        if (c.layer_types[static_cast<size_t>(layer)] == q4::LayerType::QwenSparseAttention)
            floats = add(floats, attention_floats(c, ctx));
    }
    const auto n_mtp = static_cast<uint64_t>(std::max<int64_t>(n_mtp_layers, 0));
    floats = add(floats, mul(n_mtp, attention_floats(c, ctx)));
    const auto rows = static_cast<uint64_t>(std::max<int64_t>(snapshot_rows, 0));
    floats = add(floats, mul(rows, snapshot_floats));
    return add(mul(floats, sizeof(float)), mul(ctx, sizeof(int32_t)));  // + the token history
}

}  // namespace cherenkov::engine
