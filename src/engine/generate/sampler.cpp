// Sampler: penalties, temperature, top-k, top-p and the seeded draw (sampler.h). Candidates are
// ordered by logit, descending, then by token id, so the keep-sets and the draw do not depend on
// how the standard library breaks ties.
#include "engine/generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

void require(bool ok, const std::string& message) {
    if (!ok) throw_invalid(message);
}

std::string number(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    std::string text = std::to_string(value);
    // to_string prints six decimals; trim the zeros so "1.5" reads as given.
    while (text.size() > 1 && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
    return text;
}

// A uniform double in [0, 1) from the top 53 bits of one draw: the same sequence on every
// standard library (std::uniform_real_distribution is implementation-defined).
double uniform01(std::mt19937_64& rng) {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

bool Sampler::candidate_before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

namespace {}  // namespace

void validate_sampling_options(const SamplingOptions& options) {
    require(std::isfinite(options.temperature) && options.temperature >= 0.0F,
            "--temperature must be finite and >= 0, got " + number(options.temperature));
    require(options.top_k >= 0, "--top-k must be >= 0, got " + std::to_string(options.top_k));
    require(std::isfinite(options.top_p) && options.top_p > 0.0F && options.top_p <= 1.0F,
            "--top-p must be in (0, 1], got " + number(options.top_p));
    require(std::isfinite(options.presence_penalty),
            "--presence-penalty must be finite, got " + number(options.presence_penalty));
    require(std::isfinite(options.frequency_penalty),
            "--frequency-penalty must be finite, got " + number(options.frequency_penalty));
    require(
        std::isfinite(options.repetition_penalty) && options.repetition_penalty > 0.0F,
        "--repetition-penalty must be finite and > 0, got " + number(options.repetition_penalty));
}

int32_t argmax(std::span<const float> logits) {
    CHERENKOV_ASSERT(!logits.empty(), "argmax of an empty row");
    size_t best = 0;
    for (size_t index = 1; index < logits.size(); ++index) {
        if (logits[index] > logits[best]) best = index;
    }
    return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
    validate_sampling_options(options);
}

void Sampler::observe(std::span<const int32_t> tokens) {
    if (!options_.has_penalties()) return;
    for (const int32_t token : tokens) ++counts_[token];
}

void Sampler::observe(int32_t token) {
    if (!options_.has_penalties()) return;
    ++counts_[token];
}

void Sampler::apply_penalties(std::span<float> logits) const {
    const float repetition = options_.repetition_penalty;
    for (const auto& [token, count] : counts_) {
        if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
        float& logit = logits[static_cast<size_t>(token)];
        if (repetition != 1.0F) logit = logit > 0.0F ? logit / repetition : logit * repetition;
        logit -= options_.presence_penalty + static_cast<float>(count) * options_.frequency_penalty;
    }
}

size_t Sampler::sort_candidates(size_t n_sorted, size_t n_needed, size_t n_kept) {
    n_needed = std::min(n_needed, n_kept);
    if (n_needed <= n_sorted) return n_sorted;
    // Everything after the sorted prefix ranks below it: select the next n_needed - n_sorted
    // there (linear) and sort only those.
    const auto begin = candidates_.begin();
    // A lambda, not the function pointer, so the comparison inlines into the sort.
    const auto before = [](const Candidate& a, const Candidate& b) {
        return candidate_before(a, b);
    };
    std::nth_element(begin + static_cast<ptrdiff_t>(n_sorted),
                     begin + static_cast<ptrdiff_t>(n_needed),
                     begin + static_cast<ptrdiff_t>(n_kept), before);
    std::sort(begin + static_cast<ptrdiff_t>(n_sorted), begin + static_cast<ptrdiff_t>(n_needed),
              before);
    return n_needed;
}

int32_t Sampler::sample(std::span<float> logits) {
    CHERENKOV_ASSERT(!logits.empty(), "sampling from an empty row");
    if (options_.has_penalties()) apply_penalties(logits);
    if (options_.greedy()) return argmax(logits);

    candidates_.resize(logits.size());
    for (size_t index = 0; index < logits.size(); ++index) {
        logits[index] /= options_.temperature;
        candidates_[index] = {logits[index], static_cast<int32_t>(index), 0.0F};
    }

    // Top-k moves the k best candidates to the front. Only the prefix that top-p and the draw
    // reach is sorted, widened as needed, so a 150k vocabulary costs O(V), not O(V log V).
    size_t n_kept = candidates_.size();
    if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < n_kept) {
        n_kept = static_cast<size_t>(options_.top_k);
        std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(n_kept),
                         candidates_.end(), [](const Candidate& a, const Candidate& b) {
                             return candidate_before(a, b);
                         });
    }
    size_t n_sorted = sort_candidates(0, 256, n_kept);

    // Softmax weights of the kept candidates, relative to the best one.
    const float best = candidates_[0].logit;
    if (!std::isfinite(best)) return candidates_[0].token;  // every logit is -inf
    double total = 0.0;
    for (size_t index = 0; index < n_kept; ++index) {
        candidates_[index].weight = std::exp(candidates_[index].logit - best);
        total += candidates_[index].weight;
    }

    // Top-p: the shortest sorted prefix whose probability reaches top_p (at least one).
    size_t n_nucleus = n_kept;
    double nucleus_total = total;
    if (options_.top_p < 1.0F) {
        const double target = static_cast<double>(options_.top_p) * total;
        double cumulative = 0.0;
        size_t index = 0;
        for (;;) {
            if (index == n_sorted) {
                if (n_sorted == n_kept) break;
                n_sorted = sort_candidates(n_sorted, n_sorted * 4, n_kept);
            }
            cumulative += candidates_[index].weight;
            ++index;
            if (cumulative >= target) break;
        }
        n_nucleus = std::max<size_t>(index, 1);
        nucleus_total = cumulative;
    }

    // The draw walks the nucleus in candidate order (sorted as far as top-p needed it).
    const double draw = uniform01(rng_) * nucleus_total;
    double cumulative = 0.0;
    for (size_t index = 0; index < n_nucleus; ++index) {
        cumulative += candidates_[index].weight;
        if (draw < cumulative) return candidates_[index].token;
    }
    return candidates_[n_nucleus - 1].token;
}

}  // namespace cherenkov::engine
