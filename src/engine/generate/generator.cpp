#include "engine/generate/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

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
    : model_(model), options_(std::move(options)) {
    validate_sampling_options(options_.sampling);
    if (options_.drafts < 0 || options_.drafts > 2) {
        throw_invalid("--drafts must be 0, 1 or 2, got " + std::to_string(options_.drafts));
    }
    if (options_.max_ctx < 1) throw_invalid("--max-ctx must be positive");
    validate_prefill_quantum(options_.prefill_quantum);
}

std::vector<int32_t> Generator::trunk_tokens(std::span<const int32_t> tokens,
                                             ForwardOptions options, Sampler* sampler) {
    const auto n_rows = static_cast<size_t>(options.all_logits ? tokens.size() : 1);
    // Without penalties the backend picks the tokens where the logits are and only ids cross to
    // the host. Penalties need this request's token counts, so with them the logits come back and
    // the Sampler applies penalties first. Both routes use one selection definition
    // (token_selector.h) and draw u from the same RNG in the same order.
    const bool penalties = sampler != nullptr && sampler->options().has_penalties();
    if (!penalties && !options_.host_selection) {
        selection_.rows.assign(n_rows, TokenChoice{});
        if (sampler != nullptr) selection_.rows.back() = sampler->next_choice();
        options.select = &selection_;
        return model_.forward(state_, tokens, options).tokens;
    }
    ForwardResult result = model_.forward(state_, tokens, options);
    const auto vocab = static_cast<size_t>(model_.vocab_size());
    std::vector<int32_t> picked(n_rows);
    for (size_t row = 0; row + 1 < n_rows; ++row) {
        picked[row] = argmax(std::span<const float>(result.logits).subspan(row * vocab, vocab));
    }
    const std::span<float> last = std::span<float>(result.logits).last(vocab);
    picked.back() = sampler != nullptr ? sampler->sample(last) : argmax(last);
    return picked;
}

GenerationStats Generator::generate(std::span<const int32_t> prompt,
                                    const std::function<bool(int32_t)>& on_token) {
    GenerationStats stats;
    stats.prompt_tokens = static_cast<int64_t>(prompt.size());
    if (prompt.empty()) throw_invalid("the prompt is empty");
    if (stats.prompt_tokens >= options_.max_ctx) {
        throw_invalid("the prompt has " + std::to_string(prompt.size()) +
                      " tokens, more than --max-ctx " + std::to_string(options_.max_ctx) +
                      " allows (it needs room for at least one generated token)");
    }
    const bool speculate =
        options_.drafts > 0 && model_.has_mtp() && options_.sampling.allows_speculation();
    stats.speculation = speculate;
    Sampler sampler(options_.sampling);
    sampler.observe(prompt);
    DraftPolicy policy(speculate ? options_.drafts : 0);
    state_ = model_.new_sequence(options_.max_ctx);

    // Prefill in chunks of at most the quantum (fewer rows when the backend's scratch holds
    // fewer); the last chunk's last row gives the first token.
    const auto prefill_start = std::chrono::steady_clock::now();
    stats.prefill_chunk_tokens = prefill_chunk_rows(model_, options_.prefill_quantum);
    int32_t next = 0;
    const auto chunk = static_cast<size_t>(stats.prefill_chunk_tokens);
    for (size_t at = 0; at < prompt.size(); at += chunk) {
        const size_t n = std::min(prompt.size() - at, chunk);
        ForwardOptions fo;
        fo.keep_residuals = speculate;
        // Earlier chunks' tokens are unused: a greedy pick there keeps their logits on the device.
        const bool last = at + n == prompt.size();
        next = trunk_tokens(prompt.subspan(at, n), fo, last ? &sampler : nullptr).back();
        ++stats.prefill_chunks;
    }
    stats.prefill_seconds = seconds_since(prefill_start);

    const auto decode_start = std::chrono::steady_clock::now();
    const auto is_eos = [&](int32_t token) {
        return options_.stop_at_eos && std::find(options_.eos_ids.begin(), options_.eos_ids.end(),
                                                 token) != options_.eos_ids.end();
    };
    // Emits one token; false when generation must stop.
    const auto emit = [&](int32_t token) {
        ++stats.generated_tokens;
        sampler.observe(token);
        if (!on_token(token)) {
            stats.stop_reason = "stopped";
            return false;
        }
        if (is_eos(token)) {
            stats.stop_reason = "eos";
            return false;
        }
        if (stats.generated_tokens >= options_.max_tokens) {
            stats.stop_reason = "length";
            return false;
        }
        return true;
    };
    if (options_.max_tokens <= 0) {
        stats.stop_reason = "length";
        return stats;
    }
    bool running = emit(next);
    while (running) {
        // Room for the pending token and the drafts.
        const int64_t room = options_.max_ctx - state_.position;
        if (room < 1) {
            stats.stop_reason = "context";
            break;
        }
        int n_drafts = std::min<int64_t>(policy.next(), room - 1);
        n_drafts = static_cast<int>(
            std::min<int64_t>(n_drafts, options_.max_tokens - stats.generated_tokens));
        std::vector<int32_t> rows = {next};
        if (n_drafts > 0) {
            // Drafts are greedy tokens of the MTP head, picked by the backend like the trunk's.
            const TokenSelection* greedy = options_.host_selection ? nullptr : &kGreedyRow;
            const auto draft_token = [&](const MtpResult& r) {
                return greedy != nullptr ? r.tokens[0] : argmax(r.logits);
            };
            MtpResult draft = model_.mtp_catch_up(state_, next, false, nullptr, greedy);
            const auto proposed = [&](int j, int32_t token) {
                return options_.draft_override
                           ? options_.draft_override(stats.generated_tokens + j, j, token)
                           : token;
            };
            rows.push_back(proposed(0, draft_token(draft)));
            if (n_drafts > 1) {
                MtpResult second = model_.mtp_chain(state_, draft.last_residual, rows.back(),
                                                    state_.position, 1, greedy);
                rows.push_back(proposed(1, draft_token(second)));
            }
        }
        ForwardOptions fo;
        fo.all_logits = true;
        fo.keep_residuals = speculate;
        fo.snapshot_rows = n_drafts > 0;
        // The trunk's token after each row: greedy for the verified rows (speculation is greedy).
        const std::vector<int32_t> picked = trunk_tokens(rows, fo, &sampler);
        ++stats.decode_steps;
        if (n_drafts == 0) {
            next = picked[0];
            running = emit(next);
            continue;
        }
        // Greedy acceptance: the longest run of drafts equal to the trunk's argmax.
        int accepted = 0;
        while (accepted < n_drafts &&
               rows[static_cast<size_t>(accepted) + 1] == picked[static_cast<size_t>(accepted)]) {
            ++accepted;
        }
        for (int j = 0; j < n_drafts; ++j) {
            ++stats.drafts_proposed[static_cast<size_t>(j)];
            if (j < accepted) ++stats.drafts_accepted[static_cast<size_t>(j)];
        }
        policy.record(n_drafts, accepted);
        model_.commit(state_, accepted + 1);
        for (int j = 1; j <= accepted && running; ++j) running = emit(rows[static_cast<size_t>(j)]);
        if (!running) break;
        next = picked[static_cast<size_t>(accepted)];
        running = emit(next);
    }
    stats.decode_seconds = seconds_since(decode_start);
    return stats;
}

}  // namespace cherenkov::engine
