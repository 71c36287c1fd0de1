#include "engine/model/sequence_bookkeeping.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "model_data/qwen4_exp/ngram_hashing.h"

namespace cherenkov::engine {

namespace q4 = model_data::qwen4_exp;

std::vector<int64_t> layer_ngram_ids(const ModelWeights& weights, const SequenceState& state,
                                     std::span<const int32_t> tokens,
                                     std::vector<std::vector<int64_t>>& ids) {
    const auto n_rows = static_cast<int64_t>(tokens.size());
    ids.assign(weights.layers.size(), {});
    std::vector<int64_t> token_ids(tokens.begin(), tokens.end());
    std::vector<int64_t> next_context = state.ngram_context;
    for (size_t l = 0; l < weights.layers.size(); ++l) {
        if (!weights.layers[l].ple) continue;
        const q4::NgramHash& hash = weights.layers[l].ple->hash;
        std::vector<int64_t> context = state.ngram_context;
        ids[l].resize(static_cast<size_t>(n_rows * hash.n_heads()));
        q4::ngram_ids_into(hash, context, token_ids, ids[l]);
        next_context = context;
    }
    return next_context;
}

void check_token_ids(const q4::Config& c, std::span<const int32_t> tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
            throw_invalid("token id " + std::to_string(tokens[i]) + " at index " +
                          std::to_string(i) + " is outside the vocabulary [0, " +
                          std::to_string(c.vocab_size) + ")");
        }
    }
}

std::vector<int32_t> mtp_catch_up_tokens(const q4::Config& c, const SequenceState& state,
                                         int32_t next_token) {
    const int64_t first = state.mtp_length;
    const int64_t n_rows = state.position - first;
    if (n_rows <= 0 || state.n_pending_residual_rows != n_rows) {
        throw_internal("MTP catch-up needs the residuals of rows " + std::to_string(first) + ".." +
                       std::to_string(state.position - 1));
    }
    std::vector<int32_t> tokens(state.tokens.begin() + first + 1, state.tokens.end());
    tokens.push_back(next_token);
    check_token_ids(c, tokens);
    return tokens;
}

void check_commit(const SequenceState& state, int64_t n_rows) {
    const auto n_snapshots = state.n_snapshot_rows;
    if (n_rows < 1 || n_rows > n_snapshots || state.snapshot_base + n_snapshots != state.position) {
        throw_internal("commit(" + std::to_string(n_rows) +
                       ") without a matching verification call");
    }
}

void commit_bookkeeping(const q4::Config& c, SequenceState& state, int64_t keep) {
    state.tokens.resize(static_cast<size_t>(keep));
    if (c.has_ple()) {
        // The last N-1 committed ids, EOS where fewer exist.
        const auto n = static_cast<size_t>(c.ngram_context_len);
        std::vector<int64_t> context(n, c.first_eos());
        const size_t have = std::min(n, state.tokens.size());
        for (size_t i = 0; i < have; ++i)
            context[n - have + i] = state.tokens[state.tokens.size() - have + i];
        state.ngram_context = context;
    }
    state.n_pending_residual_rows =
        std::min(state.n_pending_residual_rows, std::max<int64_t>(keep - state.mtp_length, 0));
    state.position = keep;
}

}  // namespace cherenkov::engine
