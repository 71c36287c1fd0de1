// Text generation over a Model (seed "Run", "Generation options", docs/qwen4_exp.md §6.5):
// chunked prefill, then decode one token per step, or with MTP speculation: the head drafts up to
// two tokens, the trunk verifies the pending token and the drafts in one call, the longest
// agreeing prefix is accepted and the rest rolled back. Greedy output is the same for every
// draft count. Sampling or penalties turn speculation off. Tokens are picked by the backend
// (TokenSelection: on the device for CUDA) unless penalties need the logits on the host.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/generate/sampler.h"
#include "engine/model/model_backend.h"
#include "engine/model/prefill_quantum.h"

namespace cherenkov::engine {

struct GenerationOptions {
    int64_t max_tokens = 256;
    int drafts = 2;  // 0, 1 or 2; the adaptive policy decides per step
    SamplingOptions sampling;
    bool stop_at_eos = true;
    std::vector<int32_t> eos_ids;
    int64_t max_ctx = 4096;
    // --prefill-quantum: the most prompt tokens per prefill call; calls are cut to
    // min(this, model.max_rows_per_call()) (engine/model/prefill_quantum.h).
    int64_t prefill_quantum = kDefaultPrefillQuantum;
    // Tests only: replaces draft j (0-based) proposed for output index `index` (the position in
    // the generated text the draft claims). Lets tests force acceptances and rejections.
    std::function<int32_t(int64_t index, int j, int32_t proposed)> draft_override;
    // Tests only: bring every call's logits to the host and pick tokens there, as penalties do,
    // instead of asking the backend for token ids (the two must agree).
    bool host_selection = false;
};

struct GenerationStats {
    int64_t prompt_tokens = 0;
    int64_t generated_tokens = 0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    int64_t decode_steps = 0;                  // trunk calls after the prefill
    std::array<int64_t, 2> drafts_proposed{};  // per draft position
    std::array<int64_t, 2> drafts_accepted{};
    std::string stop_reason;  // "eos", "length", "context", "stopped"
    bool speculation = false;
    int64_t prefill_chunk_tokens = 0;  // rows per prefill call (the last chunk may be shorter)
    int64_t prefill_chunks = 0;        // prefill calls
};

// Adaptive draft count: one draft; two after a round that accepted all its drafts; none for a
// while when draft 1 keeps failing (acceptance under 25% over the last 8 rounds), then retry.
class DraftPolicy {
public:
    explicit DraftPolicy(int max_drafts) : max_drafts_(max_drafts) {}
    int next();  // drafts for the coming step (0 = a plain step)
    void record(int proposed, int accepted);

private:
    int max_drafts_;
    int current_ = 1;
    int cooldown_ = 0;
    std::vector<int> recent_;  // draft-1 outcomes, last 8 rounds
};

class Generator {
public:
    Generator(ModelBackend& model, GenerationOptions options);

    // Runs `prompt` and generates. on_token is called once per emitted token, in order; returning
    // false stops generation. Throws InvalidInput before any work for an empty prompt or one that
    // does not fit in max_ctx. (The constructor throws InvalidInput for bad options, naming the
    // flag: --drafts, --max-ctx, --prefill-quantum, sampling.)
    GenerationStats generate(std::span<const int32_t> prompt,
                             const std::function<bool(int32_t)>& on_token);

    const SequenceState& state() const { return state_; }

private:
    // Runs the trunk on `tokens` and picks a token from every logit row (all rows with
    // options.all_logits, else the last): greedy, except the last row, which `sampler` picks when
    // given (greedy too whenever drafts are verified).
    std::vector<int32_t> trunk_tokens(std::span<const int32_t> tokens, ForwardOptions options,
                                      Sampler* sampler);

    ModelBackend& model_;
    GenerationOptions options_;
    SequenceState state_;
    TokenSelection selection_;  // the request of trunk_tokens, reused
};

}  // namespace cherenkov::engine
