#include "engine/model/model.h"

#include <algorithm>

#include "base/error.h"
#include "engine/experts/expert_source.h"
#include "engine/model/layers.h"
#include "engine/model/sequence_bookkeeping.h"

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

Model::Model(const ModelWeights& weights, ExpertSource& experts, ThreadPool& pool)
    : weights_(weights),
      experts_(experts),
      pool_(pool),
      rope_(weights.config.rope.rope_theta, weights.config.rotary_dim) {}

SequenceState Model::new_sequence(int64_t max_ctx) const {
    return make_sequence_state(weights_.config, max_ctx,
                               has_mtp() ? static_cast<int64_t>(weights_.mtp->layers.size()) : 0);
}

void Model::check_tokens(std::span<const int32_t> tokens) const {
    check_token_ids(weights_.config, tokens);
}

void Model::head(const HyperConnectionWeights& mixer, const Linear& lm_head, const float* x,
                 int64_t n_rows, float* logits, ForwardTrace* trace, const char* trace_name) {
    const int64_t h = weights_.config.hidden_size;
    LayerContext ctx{&weights_.config, &pool_, &experts_, &rope_, trace, "", nullptr, 0};
    std::vector<float> mix(static_cast<size_t>(n_rows * h));
    hyper_connection_mix(mixer, x, n_rows, ctx, mix.data(), nullptr);
    ctx.record(trace_name, mix.data(), n_rows * h);
    lm_head.apply(mix.data(), n_rows, logits, &pool_);
}

ForwardResult Model::forward(SequenceState& state, std::span<const int32_t> tokens,
                             const ForwardOptions& options) {
    const q4::Config& c = weights_.config;
    check_tokens(tokens);
    const auto n_rows = static_cast<int64_t>(tokens.size());
    ForwardResult result;
    if (n_rows == 0) return result;
    if (options.select != nullptr) {
        check_selection_rows(*options.select, options.all_logits ? n_rows : 1,
                             "ForwardOptions::select");
    }
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();

    // N-gram ids of every PLE layer, all from the context before this call.
    std::vector<std::vector<int64_t>> ngram_ids;
    const std::vector<int64_t> next_context = layer_ngram_ids(weights_, state, tokens, ngram_ids);

    // Embedding, replicated over the C streams.
    std::vector<float> x(static_cast<size_t>(n_rows * width));
    std::vector<float> row(static_cast<size_t>(h));
    for (int64_t t = 0; t < n_rows; ++t) {
        weights_.embed.row(tokens[static_cast<size_t>(t)], row.data());
        if (options.trace != nullptr) options.trace->record("embed", row.data(), h);
        for (int64_t s = 0; s < c.hc_count; ++s) {
            std::copy(row.begin(), row.end(), x.begin() + t * width + s * h);
        }
    }

    if (options.snapshot_rows) {
        state.row_snapshots.assign(static_cast<size_t>(n_rows), RowSnapshot{});
        for (RowSnapshot& snap : state.row_snapshots) {
            snap.gdn.resize(weights_.layers.size());
            snap.ple.resize(weights_.layers.size());
            for (size_t l = 0; l < weights_.layers.size(); ++l) {
                if (weights_.layers[l].gdn) {
                    snap.gdn[l].recurrent.resize(state.layers[l].gdn.recurrent.size());
                }
            }
        }
        state.snapshot_base = state.position;
        state.n_snapshot_rows = n_rows;
    } else {
        state.row_snapshots.clear();
        state.n_snapshot_rows = 0;
    }

    experts_.begin_step();
    LayerContext ctx{&c,
                     &pool_,
                     &experts_,
                     &rope_,
                     options.trace,
                     "",
                     options.snapshot_rows ? &state.row_snapshots : nullptr,
                     0,
                     routing_trace_,
                     trace_step_++};
    for (size_t l = 0; l < weights_.layers.size(); ++l) {
        ctx.layer_index = static_cast<int64_t>(l);
        if (options.trace != nullptr) ctx.trace_prefix = "layers." + std::to_string(l) + ".";
        const LayerWeights* next =
            l + 1 < weights_.layers.size() ? &weights_.layers[l + 1] : nullptr;
        decoder_layer_forward(weights_.layers[l], next, state.layers[l], ngram_ids[l], x.data(),
                              n_rows, state.position, ctx);
    }
    experts_.end_step();

    if (options.keep_residuals) {
        state.pending_residuals.insert(state.pending_residuals.end(), x.begin(), x.end());
    }
    const int64_t first = options.all_logits ? 0 : n_rows - 1;
    result.n_logit_rows = n_rows - first;
    result.logits.resize(static_cast<size_t>(result.n_logit_rows * c.vocab_size));
    head(weights_.final_mixer, weights_.lm_head, x.data() + first * width, result.n_logit_rows,
         result.logits.data(), options.trace, "final_hidden");
    select_tokens(options.select, result.n_logit_rows, result.logits, result.tokens);

    state.position += n_rows;
    state.tokens.insert(state.tokens.end(), tokens.begin(), tokens.end());
    state.ngram_context = next_context;
    return result;
}

void Model::select_tokens(const TokenSelection* select, int64_t n_rows, std::vector<float>& logits,
                          std::vector<int32_t>& tokens) {
    if (select == nullptr) return;
    tokens = selector_.select_rows(logits, n_rows, weights_.config.vocab_size, *select);
    if (!select->keep_logits) logits.clear();
}

void Model::commit(SequenceState& state, int64_t n_rows) {
    const q4::Config& c = weights_.config;
    check_commit(state, n_rows);
    const int64_t keep = state.snapshot_base + n_rows;
    if (keep < state.position) {
        const RowSnapshot& snap = state.row_snapshots[static_cast<size_t>(n_rows - 1)];
        for (size_t l = 0; l < weights_.layers.size(); ++l) {
            LayerState& layer = state.layers[l];
            if (weights_.layers[l].gdn) layer.gdn = snap.gdn[l];
            if (weights_.layers[l].ple) layer.ple = snap.ple[l];
            if (weights_.layers[l].qsa) {
                layer.attention.truncate(keep, c.indexer ? c.indexer->compress_ratio : 0);
            }
        }
        commit_bookkeeping(c, state, keep);
    }
    state.row_snapshots.clear();
    state.n_snapshot_rows = 0;
}

MtpResult Model::mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                              ForwardTrace* trace, const TokenSelection* select) {
    if (!has_mtp()) throw_internal("mtp_catch_up on a model without MTP weights");
    const int64_t first = state.mtp_length;
    const std::vector<int32_t> tokens = mtp_catch_up_tokens(weights_.config, state, next_token);
    for (LayerState& layer : state.mtp_layers) {
        layer.attention.truncate(
            first, weights_.config.indexer ? weights_.config.indexer->compress_ratio : 0);
    }
    MtpResult result = mtp_rows(state, state.pending_residuals.data(), tokens, first, 0, all_logits,
                                trace, select);
    state.pending_residuals.clear();
    state.mtp_length = state.position;
    return result;
}

MtpResult Model::mtp_chain(SequenceState& state, std::span<const float> previous_residual,
                           int32_t token, int64_t position, int64_t step,
                           const TokenSelection* select) {
    const int32_t tokens[1] = {token};
    check_tokens(tokens);
    const auto& mtp = *weights_.mtp;
    LayerState& layer = state.mtp_layers[static_cast<size_t>(step) % mtp.layers.size()];
    layer.attention.truncate(position,
                             weights_.config.indexer ? weights_.config.indexer->compress_ratio : 0);
    return mtp_rows(state, previous_residual.data(), tokens, position, step, false, nullptr,
                    select);
}

MtpResult Model::mtp_rows(SequenceState& state, const float* residuals,
                          std::span<const int32_t> tokens, int64_t first_position, int64_t step,
                          bool all_logits, ForwardTrace* trace, const TokenSelection* select) {
    const q4::Config& c = weights_.config;
    const MtpWeights& mtp = *weights_.mtp;
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();
    const auto n_rows = static_cast<int64_t>(tokens.size());
    const size_t layer_index = static_cast<size_t>(step) % mtp.layers.size();
    if (select != nullptr) check_selection_rows(*select, all_logits ? n_rows : 1, "the MTP select");
    LayerContext ctx{&c,     &pool_,  &experts_, &rope_,         trace,
                     "mtp.", nullptr, 0,         routing_trace_, trace_step_++};

    // ê, fe, ĥ and U = fc_hidden(ĥ_s) + fe per stream (§6.3).
    std::vector<float> e_hat(static_cast<size_t>(n_rows * h));
    for (int64_t t = 0; t < n_rows; ++t) {
        float* e = e_hat.data() + t * h;
        mtp.embed.row(tokens[static_cast<size_t>(t)], e);
        rms_norm(e, mtp.pre_fc_norm_embedding, h, ctx.eps(), e);
    }
    ctx.record("e_hat", e_hat.data(), n_rows * h);
    std::vector<float> fe(static_cast<size_t>(n_rows * h));
    mtp.fc_embedding.apply(e_hat.data(), n_rows, fe.data(), &pool_);
    ctx.record("fe", fe.data(), n_rows * h);
    std::vector<float> h_hat(static_cast<size_t>(n_rows * width));
    for (int64_t t = 0; t < n_rows; ++t) {
        rms_norm(residuals + t * width, mtp.pre_fc_norm_hidden, width, ctx.eps(),
                 h_hat.data() + t * width);
    }
    ctx.record("h_hat", h_hat.data(), n_rows * width);
    std::vector<float> x(static_cast<size_t>(n_rows * width));
    // fc_hidden over every stream at once: [T·C, H] rows.
    mtp.fc_hidden.apply(h_hat.data(), n_rows * c.hc_count, x.data(), &pool_);
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t s = 0; s < c.hc_count; ++s) {
            float* u = x.data() + t * width + s * h;
            const float* f = fe.data() + t * h;
            for (int64_t d = 0; d < h; ++d) u[d] += f[d];
        }
    }
    ctx.record("U", x.data(), n_rows * width);

    experts_.begin_step();
    ctx.trace_prefix = "mtp.layer.";
    decoder_layer_forward(mtp.layers[layer_index], nullptr, state.mtp_layers[layer_index], {},
                          x.data(), n_rows, first_position, ctx);
    experts_.end_step();
    if (trace != nullptr) trace->record("mtp.r_prime", x.data(), n_rows * width);

    MtpResult result;
    const int64_t first = all_logits ? 0 : n_rows - 1;
    result.n_logit_rows = n_rows - first;
    result.logits.resize(static_cast<size_t>(result.n_logit_rows * c.vocab_size));
    head(mtp.mixer, mtp.lm_head, x.data() + first * width, result.n_logit_rows,
         result.logits.data(), trace, "mtp.mixer_out");
    select_tokens(select, result.n_logit_rows, result.logits, result.tokens);
    result.last_residual.assign(x.end() - width, x.end());
    return result;
}

}  // namespace cherenkov::engine
