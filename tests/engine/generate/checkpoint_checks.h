// Test support shared by the CPU and CUDA checkpoint tests (state_checkpoint_test.cpp,
// tests/engine/cuda/state_checkpoint_cuda_test.cpp): generations whose state goes through a
// host checkpoint (save_checkpoint, then restore_checkpoint into a fresh state) at chosen points,
// compared bit for bit with the same generation never interrupted: every emitted token and the
// logits of the row that chose it.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/generate/generator.h"
#include "engine/generate/state_checkpoint.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::testing {

// Every emitted token with the logits of its row.
struct Emitted {
    std::vector<int32_t> tokens;
    std::vector<float> logits;

    void add(const engine::EmittedToken& t) {
        tokens.push_back(t.token);
        logits.insert(logits.end(), t.logits.begin(), t.logits.end());
    }
};

// Bitwise equality of the logits (not within a tolerance: a restore must be exact).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Greedy with MTP drafts, a fixed length, each token's logits kept.
inline engine::GenerationOptions checkpoint_options(int64_t max_tokens, int64_t max_ctx) {
    engine::GenerationOptions o;
    o.max_tokens = max_tokens;
    o.drafts = 2;
    o.stop_at_eos = false;
    o.max_ctx = max_ctx;
    o.token_logits = true;
    o.keep_prompt_logits = true;
    return o;
}

// The state after a round trip through host memory.
inline engine::SequenceState round_trip(engine::ModelBackend& model, const engine::SequenceState& s,
                                        int64_t max_ctx) {
    const engine::StateCheckpoint c = engine::save_checkpoint(s);
    engine::SequenceState restored = model.new_sequence(max_ctx);
    engine::restore_checkpoint(c, restored);
    return restored;
}

// Runs `prompt`, prefilling `first_chunk` rows first (0: the whole prompt in the first call);
// `between(generator, step)` runs before every step after the first.
inline Emitted run_generation(engine::ModelBackend& model, const std::vector<int32_t>& prompt,
                              const engine::GenerationOptions& options, int64_t first_chunk,
                              const std::function<void(engine::Generator&, int)>& between = {}) {
    engine::Generator g(model, options);
    g.start(prompt);
    Emitted out;
    const auto sink = [&](const engine::EmittedToken& t) {
        out.add(t);
        return true;
    };
    bool more = g.step(sink, first_chunk);
    for (int step = 1; more; ++step) {
        if (between) between(g, step);
        more = g.step(sink);
    }
    return out;
}

// Prefills `prompt[0, k)`, checkpoints the state, and generates from a fresh state restored from
// the checkpoint: returns what that generation emits.
inline Emitted resumed_at(engine::ModelBackend& model, const std::vector<int32_t>& prompt,
                          const engine::GenerationOptions& options, int64_t k) {
    engine::Generator first(model, options);
    first.start(prompt);
    const auto ignore = [](const engine::EmittedToken&) { return true; };
    first.step(ignore, k);
    EXPECT_EQ(first.prompt_done(), k);
    const engine::StateCheckpoint c = engine::save_checkpoint(first.state());
    std::vector<float> logits;
    if (k == static_cast<int64_t>(prompt.size())) {
        logits.assign(first.prompt_logits().begin(), first.prompt_logits().end());
    }
    std::optional<engine::SequenceState> state = model.new_sequence(options.max_ctx);
    engine::restore_checkpoint(c, *state);
    engine::Generator resumed(model, options);
    resumed.start(prompt, std::move(state), logits);
    EXPECT_EQ(resumed.stats().cached_tokens, k);
    Emitted out;
    while (resumed.step([&](const engine::EmittedToken& t) {
        out.add(t);
        return true;
    })) {
    }
    return out;
}

// Prefix lengths of an n-token prompt around the QSA block (compress ratio r) and PLE window (w)
// edges of `c`, and the whole prompt.
inline std::vector<int64_t> edge_splits(const model_data::qwen4_exp::Config& c, int64_t n) {
    std::vector<int64_t> splits = {1, n - 1, n};
    const int64_t r = c.indexer ? c.indexer->compress_ratio : 4;
    const int64_t w = c.has_ple() ? c.ple_conv_state_len : 8;
    for (const int64_t edge : {r, 2 * r, w, 2 * w}) {
        for (const int64_t k : {edge - 1, edge, edge + 1}) splits.push_back(k);
    }
    return splits;
}

// The checks: (1) a prefix checkpoint at each of `splits` (inside and at the edge of a QSA block
// and a PLE window, and the whole prompt: an exact hit) restored into a fresh state continues
// exactly as the uninterrupted generation; (2) a state taken through a checkpoint before every
// decode step (MTP caches, pending residuals, attention lengths after rollbacks) decodes exactly
// as one never checkpointed.
inline void check_checkpoints_are_exact(engine::ModelBackend& model,
                                        const std::vector<int32_t>& prompt,
                                        const std::vector<int64_t>& splits,
                                        const std::string& label) {
    constexpr int64_t kMaxCtx = 256;
    const engine::GenerationOptions options = checkpoint_options(40, kMaxCtx);
    for (const int64_t k : splits) {
        if (k <= 0 || k > static_cast<int64_t>(prompt.size())) continue;
        const Emitted expected = run_generation(model, prompt, options, k);
        const Emitted resumed = resumed_at(model, prompt, options, k);
        EXPECT_EQ(resumed.tokens, expected.tokens) << label << " split " << k;
        EXPECT_TRUE(same_bits(resumed.logits, expected.logits)) << label << " split " << k;
    }
    const Emitted expected = run_generation(model, prompt, options, 0);
    int round_trips = 0;
    const Emitted checkpointed =
        run_generation(model, prompt, options, 0, [&](engine::Generator& g, int) {
            g.state() = round_trip(model, g.state(), kMaxCtx);
            ++round_trips;
        });
    EXPECT_GT(round_trips, 10) << label;
    EXPECT_EQ(checkpointed.tokens, expected.tokens) << label << " every step";
    EXPECT_TRUE(same_bits(checkpointed.logits, expected.logits)) << label << " every step";
}

}  // namespace cherenkov::testing
