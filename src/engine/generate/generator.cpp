#include "engine/generate/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/generate/state_checkpoint.h"

namespace cherenkov::engine {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A request for the greedy token of one row (MTP drafts).
const TokenSelection kGreedyRow{{TokenChoice{}}, false};

}  // namespace

int DraftPolicy::next() {
    if (max_drafts_ <= 0) return 0;
    if (cooldown_ > 0) {
        --cooldown_;
        return 0;
    }
    return std::min(current_, max_drafts_);
}

void DraftPolicy::record(int proposed, int accepted) {
    if (proposed <= 0) return;
    current_ = accepted == proposed ? max_drafts_ : 1;
    recent_.push_back(accepted > 0 ? 1 : 0);
    if (recent_.size() > 8) recent_.erase(recent_.begin());
    if (recent_.size() == 8) {
        int hits = 0;
        for (int r : recent_) hits += r;
        if (hits * 4 < 8) {
            cooldown_ = 16;
            recent_.clear();
        }
    }
}

Generator::Generator(ModelBackend& model, GenerationOptions options)
    : model_(model), options_(std::move(options)), sampler_(options_.sampling) {
    if (options_.drafts < 0 || options_.drafts > 2) {
        throw_invalid("--drafts must be 0, 1 or 2, got " + std::to_string(options_.drafts));
    }
    if (options_.max_ctx < 1) throw_invalid("--max-ctx must be positive");
}

std::vector<int32_t> Generator::trunk_tokens(std::span<const int32_t> tokens,
                                             ForwardOptions options, Sampler* sampler,
                                             bool keep_logits) {
    const auto n_rows = static_cast<size_t>(options.all_logits ? tokens.size() : 1);
    const auto vocab = static_cast<size_t>(model_.vocab_size());
    // Without penalties the backend picks the tokens where the logits are and only ids cross to
    // the host (with token_logits the logits come along). Penalties need this request's token
    // counts, so with them the logits come back and the Sampler applies penalties first. Both
    // routes use one selection definition (token_selector.h) and draw u from the same RNG in the
    // same order.
    const bool penalties = sampler != nullptr && sampler->options().has_penalties();
    if (!penalties && !options_.host_selection) {
        selection_.rows.assign(n_rows, TokenChoice{});
        selection_.keep_logits = keep_logits;
        if (sampler != nullptr) selection_.rows.back() = sampler->next_choice();
        options.select = &selection_;
        ForwardResult result = model_.forward(state_, tokens, options);
        if (keep_logits) row_logits_ = std::move(result.logits);
        return std::move(result.tokens);
    }
    ForwardResult result = model_.forward(state_, tokens, options);
    std::vector<int32_t> picked(n_rows);
    for (size_t row = 0; row + 1 < n_rows; ++row) {
        picked[row] = argmax(std::span<const float>(result.logits).subspan(row * vocab, vocab));
    }
    const std::span<float> last = std::span<float>(result.logits).last(vocab);
    if (keep_logits) row_logits_ = result.logits;  // before penalties change `last`
    picked.back() = sampler != nullptr ? sampler->sample(last) : argmax(last);
    return picked;
}

bool speculation_enabled(const ModelBackend& model, const GenerationOptions& options) {
    return options.drafts > 0 && model.has_mtp() && options.sampling.allows_speculation();
}

void Generator::start(std::span<const int32_t> prompt, std::optional<SequenceState>&& state,
                      std::span<const float> prompt_logits) {
    stats_ = GenerationStats{};
    stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
    if (prompt.empty()) throw_invalid("the prompt is empty");
    if (stats_.prompt_tokens >= options_.max_ctx) {
        throw_invalid("the prompt has " + std::to_string(prompt.size()) +
                      " tokens, more than --max-ctx " + std::to_string(options_.max_ctx) +
                      " allows (it needs room for at least one generated token)");
    }
    speculate_ = speculation_enabled(model_, options_);
    stats_.speculation = speculate_;
    const int64_t done = state ? state->position : 0;
    if (done > 0) check_restored_prefix(prompt, *state, prompt_logits);
    sampler_ = Sampler(options_.sampling);
    if (options_.rng) sampler_.set_rng(*options_.rng);
    sampler_.observe(prompt);
    policy_ = DraftPolicy(speculate_ ? options_.drafts : 0);
    state_ = state ? std::move(*state) : model_.new_sequence(options_.max_ctx);
    prompt_.assign(prompt.begin(), prompt.end());
    prompt_done_ = done;
    stats_.cached_tokens = done;
    first_from_logits_ = done == stats_.prompt_tokens;
    if (first_from_logits_) {
        prompt_logits_.assign(prompt_logits.begin(), prompt_logits.end());
    } else {
        prompt_logits_.clear();
    }
    finished_ = false;
}

void Generator::check_restored_prefix(std::span<const int32_t> prompt, const SequenceState& state,
                                      std::span<const float> prompt_logits) const {
    const int64_t done = state.position;
    const bool prefix = done <= static_cast<int64_t>(prompt.size()) &&
                        static_cast<int64_t>(state.tokens.size()) == done &&
                        std::equal(state.tokens.begin(), state.tokens.end(), prompt.begin());
    if (!prefix) {
        throw_invalid("the start state's " + std::to_string(done) +
                      " tokens are not a prefix of the " + std::to_string(prompt.size()) +
                      "-token prompt");
    }
    if (done == static_cast<int64_t>(prompt.size()) &&
        static_cast<int64_t>(prompt_logits.size()) != model_.vocab_size()) {
        throw_invalid("a start state holding the whole prompt needs the logits of its last row");
    }
    if (speculate_ && !mtp_state_complete(state, model_.config())) {
        throw_internal(
            "the start state's MTP head cannot continue (missing residuals or a row "
            "computed with a token past the state)");
    }
}

void Generator::stop(const std::string& reason) {
    if (finished_) return;
    stats_.stop_reason = reason;
    finished_ = true;
}

bool Generator::is_eos(int32_t token) const {
    return options_.stop_at_eos && std::find(options_.eos_ids.begin(), options_.eos_ids.end(),
                                             token) != options_.eos_ids.end();
}

bool Generator::emit(const TokenSink& sink, int32_t token, int64_t logit_row) {
    ++stats_.generated_tokens;
    sampler_.observe(token);
    EmittedToken emitted{token, {}};
    if (options_.token_logits) {
        const auto vocab = static_cast<size_t>(model_.vocab_size());
        emitted.logits = std::span<const float>(row_logits_)
                             .subspan(static_cast<size_t>(logit_row) * vocab, vocab);
    }
    if (!sink(emitted)) {
        stats_.stop_reason = "stopped";
        return false;
    }
    if (is_eos(token)) {
        stats_.stop_reason = "eos";
        return false;
    }
    if (stats_.generated_tokens >= options_.max_tokens) {
        stats_.stop_reason = "length";
        return false;
    }
    return true;
}

int32_t Generator::first_token_from_prompt_logits() {
    row_logits_ = prompt_logits_;
    // The request's own sampler, as on the host path of trunk_tokens: penalties change a copy.
    std::vector<float> row = prompt_logits_;
    return sampler_.sample(row);
}

bool Generator::step(const TokenSink& sink, int64_t prefill_rows) {
    CHERENKOV_ASSERT(!finished_, "step() on a finished generation");
    if (first_from_logits_) {
        first_from_logits_ = false;
        const auto started = std::chrono::steady_clock::now();
        next_ = first_token_from_prompt_logits();
        stats_.prefill_seconds += seconds_since(started);
        if (options_.max_tokens <= 0) {
            stop("length");
            return false;
        }
        finished_ = !emit(sink, next_, 0);
        return !finished_;
    }
    if (prompt_remaining() > 0) {
        // Prefill in chunks of at most the quantum (fewer rows when the backend's scratch holds
        // fewer, or the caller asks for fewer); the last chunk's last row gives the first token.
        const int64_t chunk = prefill_chunk_rows(model_, options_.prefill_quantum);
        const int64_t rows = prefill_rows > 0 ? std::min(prefill_rows, chunk) : chunk;
        const auto started = std::chrono::steady_clock::now();
        const int64_t n = std::min(prompt_remaining(), rows);
        ForwardOptions fo;
        fo.keep_residuals = speculate_;
        // Earlier chunks' tokens are unused: a greedy pick there keeps their logits on the device.
        const bool last = prompt_done_ + n == static_cast<int64_t>(prompt_.size());
        const std::span<const int32_t> tokens = std::span<const int32_t>(prompt_).subspan(
            static_cast<size_t>(prompt_done_), static_cast<size_t>(n));
        // Only the last chunk's last row chooses a token.
        const bool keep = last && (options_.token_logits || options_.keep_prompt_logits);
        next_ = trunk_tokens(tokens, fo, last ? &sampler_ : nullptr, keep).back();
        if (last && options_.keep_prompt_logits) {
            const auto vocab = static_cast<size_t>(model_.vocab_size());
            prompt_logits_.assign(row_logits_.end() - static_cast<std::ptrdiff_t>(vocab),
                                  row_logits_.end());
        }
        prompt_done_ += n;
        ++stats_.prefill_chunks;
        stats_.prefill_chunk_tokens = std::max(stats_.prefill_chunk_tokens, rows);
        const double chunk_seconds = seconds_since(started);
        stats_.prefill_seconds += chunk_seconds;
        if (options_.prefill_counters != nullptr)
            options_.prefill_counters->record(static_cast<uint64_t>(n), chunk_seconds);
        if (!last) return true;
        if (options_.max_tokens <= 0) {
            stop("length");
            return false;
        }
        finished_ = !emit(sink, next_, 0);
        return !finished_;
    }
    const auto started = std::chrono::steady_clock::now();
    decode_step(sink);
    stats_.decode_seconds += seconds_since(started);
    return !finished_;
}

void Generator::decode_step(const TokenSink& sink) {
    // Room for the pending token and the drafts.
    const int64_t room = options_.max_ctx - state_.position;
    if (room < 1) {
        stop("context");
        return;
    }
    int n_drafts = static_cast<int>(std::min<int64_t>(policy_.next(), room - 1));
    n_drafts = static_cast<int>(
        std::min<int64_t>(n_drafts, options_.max_tokens - stats_.generated_tokens));
    std::vector<int32_t> rows = {next_};
    if (n_drafts > 0) {
        // Drafts are greedy tokens of the MTP head, picked by the backend like the trunk's.
        const TokenSelection* greedy = options_.host_selection ? nullptr : &kGreedyRow;
        const auto draft_token = [&](const MtpResult& r) {
            return greedy != nullptr ? r.tokens[0] : argmax(r.logits);
        };
        MtpResult draft = model_.mtp_catch_up(state_, next_, false, nullptr, greedy);
        const auto proposed = [&](int j, int32_t token) {
            return options_.draft_override
                       ? options_.draft_override(stats_.generated_tokens + j, j, token)
                       : token;
        };
        rows.push_back(proposed(0, draft_token(draft)));
        if (n_drafts > 1) {
            MtpResult second = model_.mtp_chain(state_, rows.back(), state_.position, 1, greedy);
            rows.push_back(proposed(1, draft_token(second)));
        }
    }
    ForwardOptions fo;
    fo.all_logits = true;
    fo.keep_residuals = speculate_;
    fo.snapshot_rows = n_drafts > 0;
    // The trunk's token after each row: greedy for the verified rows (speculation is greedy).
    const std::vector<int32_t> picked = trunk_tokens(rows, fo, &sampler_, options_.token_logits);
    ++stats_.decode_steps;
    if (n_drafts == 0) {
        next_ = picked[0];
        finished_ = !emit(sink, next_, 0);
        return;
    }
    // Greedy acceptance: the longest run of drafts equal to the trunk's argmax.
    int accepted = 0;
    while (accepted < n_drafts &&
           rows[static_cast<size_t>(accepted) + 1] == picked[static_cast<size_t>(accepted)]) {
        ++accepted;
    }
    for (int j = 0; j < n_drafts; ++j) {
        ++stats_.drafts_proposed[static_cast<size_t>(j)];
        if (j < accepted) ++stats_.drafts_accepted[static_cast<size_t>(j)];
    }
    policy_.record(n_drafts, accepted);
    model_.commit(state_, accepted + 1);
    // Accepted draft j is the trunk's pick after row j - 1, so that row chose it.
    for (int j = 1; j <= accepted; ++j) {
        if (!emit(sink, rows[static_cast<size_t>(j)], j - 1)) {
            finished_ = true;
            return;
        }
    }
    next_ = picked[static_cast<size_t>(accepted)];
    finished_ = !emit(sink, next_, accepted);
}

GenerationStats Generator::generate(std::span<const int32_t> prompt,
                                    const std::function<bool(int32_t)>& on_token) {
    start(prompt);
    const TokenSink sink = [&](const EmittedToken& t) { return on_token(t.token); };
    while (step(sink)) {
    }
    return stats_;
}

}  // namespace cherenkov::engine
