#include "engine/generate/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace cherenkov::engine {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::span<const float> row_of(const std::vector<float>& logits, int64_t row, int64_t vocab) {
    return std::span<const float>(logits).subspan(static_cast<size_t>(row * vocab),
                                                  static_cast<size_t>(vocab));
}

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
    const int64_t vocab = model_.vocab_size();
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
    ForwardOptions prefill;
    prefill.keep_residuals = speculate;
    ForwardResult result = forward_in_chunks(model_, state_, prompt, prefill,
                                             stats.prefill_chunk_tokens, &stats.prefill_chunks);
    std::vector<float> logits = result.logits;
    int32_t next = sampler.sample(logits);
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
            MtpResult draft = model_.mtp_catch_up(state_, next, false);
            const auto proposed = [&](int j, int32_t token) {
                return options_.draft_override
                           ? options_.draft_override(stats.generated_tokens + j, j, token)
                           : token;
            };
            rows.push_back(proposed(0, argmax(draft.logits)));
            if (n_drafts > 1) {
                MtpResult second =
                    model_.mtp_chain(state_, draft.last_residual, rows.back(), state_.position, 1);
                rows.push_back(proposed(1, argmax(second.logits)));
            }
        }
        ForwardOptions fo;
        fo.all_logits = true;
        fo.keep_residuals = speculate;
        fo.snapshot_rows = n_drafts > 0;
        result = model_.forward(state_, rows, fo);
        ++stats.decode_steps;
        if (n_drafts == 0) {
            logits = std::move(result.logits);
            next = sampler.sample(logits);
            running = emit(next);
            continue;
        }
        // Greedy acceptance: the longest run of drafts equal to the trunk's argmax.
        int accepted = 0;
        while (accepted < n_drafts && rows[static_cast<size_t>(accepted) + 1] ==
                                          argmax(row_of(result.logits, accepted, vocab))) {
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
        next = argmax(row_of(result.logits, accepted, vocab));
        running = emit(next);
    }
    stats.decode_seconds = seconds_since(decode_start);
    return stats;
}

}  // namespace cherenkov::engine
