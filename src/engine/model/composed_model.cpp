#include "engine/model/composed_model.h"

#include <string>

#include "base/error.h"
#include "engine/experts/expert_source.h"
#include "engine/model/sequence_bookkeeping.h"

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

ComposedModel::ComposedModel(const ModelWeights& weights, ExpertSource& experts,
                             std::unique_ptr<BackendOps> ops)
    : weights_(weights), experts_(experts), ops_(std::move(ops)) {}

SequenceState ComposedModel::new_sequence(int64_t max_ctx) const {
    return ops_->new_sequence(max_ctx);
}

template <typename Body>
void ComposedModel::run_pass(SequenceState& state, const PassSpec& spec, Body&& body) {
    {
        const std::unique_ptr<ForwardPass> pass = ops_->begin_pass(state, spec);
        body(*pass);
    }
    ops_->after_pass();
}

void ComposedModel::head(ForwardPass& pass, const PassSpec& spec, Head which, const float* x,
                         const char* trace_name) {
    const int64_t h = weights_.config.hidden_size;
    const int64_t n = spec.logit_rows;
    pass.set_trace_prefix("");
    float* mix = pass.call_array(n * h);
    pass.mix(which == Head::Trunk ? Mixer::Final : Mixer::MtpHead,
             x + (spec.n_rows() - n) * weights_.config.hc_width(), n, mix, nullptr);
    pass.record(trace_name, mix, n * h);
    pass.head(which, mix, n);
}

ForwardResult ComposedModel::forward(SequenceState& state, std::span<const int32_t> tokens,
                                     const ForwardOptions& options) {
    const q4::Config& c = weights_.config;
    check_token_ids(c, tokens);
    const auto n_rows = static_cast<int64_t>(tokens.size());
    ForwardResult result;
    if (n_rows == 0) return result;
    if (options.select != nullptr) {
        check_selection_rows(*options.select, options.all_logits ? n_rows : 1,
                             "ForwardOptions::select");
    }
    ops_->check_room(state, n_rows);
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();

    // N-gram ids of every PLE layer, all from the context before this call.
    std::vector<std::vector<int64_t>> ngram_ids;
    const std::vector<int64_t> next_context = layer_ngram_ids(weights_, state, tokens, ngram_ids);
    // The rows are needed once the layers before the PLE layer ran: start their page reads now.
    ple_read_ahead_.request(weights_, ngram_ids);

    PassSpec spec;
    spec.tokens = tokens;
    spec.first_position = state.position;
    spec.trace = options.trace;
    spec.snapshot_rows = options.snapshot_rows;
    spec.ngram_ids = &ngram_ids;
    spec.logit_rows = options.all_logits ? n_rows : 1;
    spec.select = options.select;
    spec.routing_trace = routing_trace_;
    spec.trace_step = trace_step_++;
    if (options.snapshot_rows) {
        state.snapshot_base = state.position;
        state.n_snapshot_rows = n_rows;
    } else {
        state.n_snapshot_rows = 0;
    }

    run_pass(state, spec, [&](ForwardPass& pass) {
        float* x = pass.call_array(n_rows * width);
        float* embedded = pass.call_array(n_rows * h);
        experts_.begin_step();
        pass.step([&] {
            pass.set_trace_prefix("");
            pass.embed(x, embedded);
            pass.record("embed", embedded, n_rows * h);
            const size_t n_layers = weights_.layers.size();
            for (size_t l = 0; l < n_layers; ++l) {
                const LayerRef next{false, l + 1};
                compose_decoder_layer(
                    pass, weights_.layers[l], LayerRef{false, l},
                    l + 1 < n_layers ? &next : nullptr,
                    options.trace != nullptr ? "layers." + std::to_string(l) + "." : std::string(),
                    x, n_rows, c);
            }
            head(pass, spec, Head::Trunk, x, "final_hidden");
        });
        experts_.end_step();
        if (options.keep_residuals) pass.keep_residuals(x);
        pass.collect(result.logits, result.tokens);
    });
    result.n_logit_rows = spec.logit_rows;
    if (options.keep_residuals) state.n_pending_residual_rows += n_rows;

    state.position += n_rows;
    state.tokens.insert(state.tokens.end(), tokens.begin(), tokens.end());
    state.ngram_context = next_context;
    return result;
}

void ComposedModel::commit(SequenceState& state, int64_t n_rows) {
    check_commit(state, n_rows);
    const int64_t keep = state.snapshot_base + n_rows;
    if (keep < state.position) {
        for (size_t l = 0; l < weights_.layers.size(); ++l) {
            ops_->rollback_layer(state, l, n_rows - 1, keep);
        }
        commit_bookkeeping(weights_.config, state, keep);
        ops_->truncate_residuals(state, state.n_pending_residual_rows);
    }
    state.row_snapshots.clear();
    state.n_snapshot_rows = 0;
}

MtpResult ComposedModel::mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                                      ForwardTrace* trace, const TokenSelection* select) {
    if (!has_mtp()) throw_internal("mtp_catch_up on a model without MTP weights");
    const int64_t first = state.mtp_length;
    const std::vector<int32_t> tokens = mtp_catch_up_tokens(weights_.config, state, next_token);
    for (size_t k = 0; k < weights_.mtp->layers.size(); ++k)
        ops_->truncate_mtp_attention(state, k, first);
    MtpResult result = mtp_rows(state, false, tokens, first, 0, all_logits, trace, select);
    ops_->clear_residuals(state);
    state.n_pending_residual_rows = 0;
    state.mtp_length = state.position;
    return result;
}

MtpResult ComposedModel::mtp_chain(SequenceState& state, int32_t token, int64_t position,
                                   int64_t step, const TokenSelection* select) {
    if (!has_mtp()) throw_internal("mtp_chain on a model without MTP weights");
    const int32_t tokens[1] = {token};
    check_token_ids(weights_.config, tokens);
    const size_t layer = static_cast<size_t>(step) % weights_.mtp->layers.size();
    ops_->truncate_mtp_attention(state, layer, position);
    return mtp_rows(state, true, tokens, position, step, false, nullptr, select);
}

MtpResult ComposedModel::mtp_rows(SequenceState& state, bool chain, std::span<const int32_t> tokens,
                                  int64_t first_position, int64_t step, bool all_logits,
                                  ForwardTrace* trace, const TokenSelection* select) {
    const q4::Config& c = weights_.config;
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();
    const auto n_rows = static_cast<int64_t>(tokens.size());
    const size_t layer = static_cast<size_t>(step) % weights_.mtp->layers.size();
    if (select != nullptr) check_selection_rows(*select, all_logits ? n_rows : 1, "the MTP select");

    PassSpec spec;
    spec.tokens = tokens;
    spec.first_position = first_position;
    spec.trace = trace;
    spec.mtp_layer = static_cast<int64_t>(layer);
    spec.chain = chain;
    spec.logit_rows = all_logits ? n_rows : 1;
    spec.select = select;
    spec.routing_trace = routing_trace_;
    spec.trace_step = trace_step_++;

    MtpResult result;
    run_pass(state, spec, [&](ForwardPass& pass) {
        float* e_hat = pass.call_array(n_rows * h);
        float* fe = pass.call_array(n_rows * h);
        float* h_hat = pass.call_array(n_rows * width);
        float* x = pass.call_array(n_rows * width);
        pass.residual_input(h_hat);
        experts_.begin_step();
        pass.step([&] {
            // ê, fe, ĥ and U = fc_hidden(ĥ_s) + fe per stream (§6.3).
            pass.set_trace_prefix("mtp.");
            pass.mtp_embed(e_hat);
            pass.mtp_norm(MtpNorm::Embedding, e_hat, n_rows, h);
            pass.record("e_hat", e_hat, n_rows * h);
            pass.mtp_linear(MtpLinear::FcEmbedding, e_hat, n_rows, fe);
            pass.record("fe", fe, n_rows * h);
            pass.mtp_norm(MtpNorm::Hidden, h_hat, n_rows, width);
            pass.record("h_hat", h_hat, n_rows * width);
            // fc_hidden over every stream at once: [T·C, H] rows.
            pass.mtp_linear(MtpLinear::FcHidden, h_hat, n_rows * c.hc_count, x);
            pass.add_per_stream(x, fe);
            pass.record("U", x, n_rows * width);

            compose_decoder_layer(pass, weights_.mtp->layers[layer], LayerRef{true, layer}, nullptr,
                                  "mtp.layer.", x, n_rows, c);
            pass.set_trace_prefix("");
            pass.record("mtp.r_prime", x, n_rows * width);
            head(pass, spec, Head::Mtp, x, "mtp.mixer_out");
        });
        experts_.end_step();
        pass.keep_chain_residual(x);
        pass.collect(result.logits, result.tokens);
    });
    result.n_logit_rows = spec.logit_rows;
    return result;
}

}  // namespace cherenkov::engine
