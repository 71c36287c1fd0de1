// Text generation over a Model (seed "Run", "Generation options", docs/qwen4_exp.md §6.5):
// chunked prefill, then decode one token per step, or with MTP speculation: the head drafts up to
// two tokens, the trunk verifies the pending token and the drafts in one call, the longest
// agreeing prefix is accepted and the rest rolled back. Greedy output is the same for every
// draft count. Sampling or penalties turn speculation off. Tokens are picked by the backend
// (TokenSelection: on the device for CUDA) unless penalties need the logits on the host.
//
// A generation runs in steps, so one thread can interleave several (the server's worker, seed
// "Serving architecture"): a step is one prefill chunk or one decode step (a token with its
// drafts). Between steps a generation holds nothing but its own state: the token it will emit
// next is already chosen, so a suspended request is never sampled again and no other request
// consumes its random draws.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/generate/prefill_counters.h"
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
    PrefillQuantum prefill_quantum;
    // Hand each emitted token the logits of the row that chose it (before penalties), for
    // log-probabilities. Tokens are still chosen exactly as without it.
    bool token_logits = false;
    // Keep the logits of the prompt's last row (prompt_logits()): a checkpoint of the complete
    // prompt stores them, so an exact prefix hit can choose its first token (docs/qwen4_exp.md
    // §5.3).
    bool keep_prompt_logits = false;
    // Continue this random stream instead of seeding one from sampling.seed (seed "Sampling": a
    // session continues its committed stream unless the turn gives a seed).
    std::optional<std::mt19937_64> rng;
    // Tests only: replaces draft j (0-based) proposed for output index `index` (the position in
    // the generated text the draft claims). Lets tests force acceptances and rejections.
    std::function<int32_t(int64_t index, int j, int32_t proposed)> draft_override;
    // Tests only: bring every call's logits to the host and pick tokens there, as penalties do,
    // instead of asking the backend for token ids (the two must agree).
    bool host_selection = false;
    // The engine's prefill totals (LoadedModel::prefill_counters()): every completed prefill
    // chunk is added there too. Null: counted only in this generation's stats.
    PrefillCounters* prefill_counters = nullptr;
};

struct GenerationStats {
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;  // prompt tokens the start state held already (a restored prefix)
    int64_t generated_tokens = 0;
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    int64_t decode_steps = 0;                  // trunk calls after the prefill
    std::array<int64_t, 2> drafts_proposed{};  // per draft position
    std::array<int64_t, 2> drafts_accepted{};
    std::string stop_reason;  // "eos", "length", "context", "stopped"
    bool speculation = false;
    int64_t prefill_chunk_tokens = 0;  // most rows of a prefill call (the last may be shorter)
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

// One emitted token. `logits` is the row that chose it, before penalties (empty unless
// GenerationOptions::token_logits); valid only during the callback.
struct EmittedToken {
    int32_t token = 0;
    std::span<const float> logits;
};

// Receives each emitted token, in order; returning false stops generation ("stopped").
using TokenSink = std::function<bool(const EmittedToken&)>;

// Whether a generation with `options` on `model` runs MTP drafts: greedy without penalties, a
// model with an MTP head, and drafts > 0.
bool speculation_enabled(const ModelBackend& model, const GenerationOptions& options);

class Generator {
public:
    // Throws InvalidInput for bad options, naming the flag: --drafts, --max-ctx, sampling (the
    // prefill quantum was checked when it was made).
    Generator(ModelBackend& model, GenerationOptions options);

    // Runs `prompt` and generates. on_token is called once per emitted token, in order; returning
    // false stops generation. Throws InvalidInput before any work for an empty prompt or one that
    // does not fit in max_ctx.
    GenerationStats generate(std::span<const int32_t> prompt,
                             const std::function<bool(int32_t)>& on_token);

    // Stepwise use. start() checks the prompt (as generate does) and takes the sequence state to
    // run in: a fresh one from the model unless given (the server hands in a state whose
    // backend caches it recycles). Then each step() runs one prefill chunk of at most
    // `prefill_rows` rows (0: the options' chunk) or one decode step, and returns whether
    // another step is needed.
    //
    // A given state may hold a prefix of the prompt already (a restored checkpoint, prefix
    // cache): its tokens must be the prompt's first state.position tokens, and only the rest is
    // prefilled. A state holding the whole prompt needs `prompt_logits`, the logits of the
    // prompt's last row [V], from which the first step chooses the first token with this
    // request's own sampler. When the generation speculates, the state's MTP head must be able
    // to continue (mtp_state_complete). Throws InvalidInput for a state that does not fit the
    // prompt, Internal for one without the MTP state speculation needs.
    // The state is moved from only once every check passed: a caller whose state holds shared
    // caches still has it when start() throws.
    void start(std::span<const int32_t> prompt, std::optional<SequenceState>&& state = {},
               std::span<const float> prompt_logits = {});
    bool step(const TokenSink& sink, int64_t prefill_rows = 0);

    bool finished() const { return finished_; }
    // Prompt tokens not yet run (0 once decoding).
    int64_t prompt_remaining() const { return static_cast<int64_t>(prompt_.size()) - prompt_done_; }
    // Prompt tokens the state has processed.
    int64_t prompt_done() const { return prompt_done_; }
    // Whether the generation runs MTP drafts (greedy, unpenalized, with a head and --drafts).
    bool speculates() const { return speculate_; }
    // With keep_prompt_logits, once the prompt is prefilled: the logits of its last row [V].
    std::span<const float> prompt_logits() const { return prompt_logits_; }
    // Ends generation as if the sink had returned false, without more work.
    void stop(const std::string& reason);

    const GenerationStats& stats() const { return stats_; }
    const SequenceState& state() const { return state_; }
    SequenceState& state() { return state_; }
    const Sampler& sampler() const { return sampler_; }

private:
    // Runs the trunk on `tokens` and picks a token from every logit row (all rows with
    // options.all_logits, else the last): greedy, except the last row, which `sampler` picks when
    // given (greedy too whenever drafts are verified). With `keep_logits` the rows' logits are
    // kept in row_logits_.
    std::vector<int32_t> trunk_tokens(std::span<const int32_t> tokens, ForwardOptions options,
                                      Sampler* sampler, bool keep_logits);
    // The first token of an exact prefix hit: chosen from the stored logits of the prompt's last
    // row, on the host, by this request's sampler.
    int32_t first_token_from_prompt_logits();
    void check_restored_prefix(std::span<const int32_t> prompt, const SequenceState& state,
                               std::span<const float> prompt_logits) const;
    void decode_step(const TokenSink& sink);
    // Emits one token whose choosing row is `logit_row` of row_logits_; false when generation
    // must stop (stop_reason set).
    bool emit(const TokenSink& sink, int32_t token, int64_t logit_row);
    bool is_eos(int32_t token) const;

    ModelBackend& model_;
    GenerationOptions options_;
    SequenceState state_;
    TokenSelection selection_;  // the request of trunk_tokens, reused

    Sampler sampler_;
    DraftPolicy policy_{0};
    GenerationStats stats_;
    std::vector<int32_t> prompt_;
    int64_t prompt_done_ = 0;
    int32_t next_ = 0;  // the last emitted token, which the next decode step runs first
    bool finished_ = true;
    bool speculate_ = false;
    std::vector<float> row_logits_;     // token_logits: [rows of the last trunk call, V]
    std::vector<float> prompt_logits_;  // keep_prompt_logits, or an exact hit's given logits: [V]
    bool first_from_logits_ = false;    // the next step chooses the first token from them
};

}  // namespace cherenkov::engine
