// Sampler: penalties, then the shared selection (engine/model/token_selector.h) with a u from the
// request's seeded RNG (sampler.h).
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

TokenChoice Sampler::next_choice() {
    TokenChoice choice;
    if (options_.greedy()) return choice;
    choice.temperature = options_.temperature;
    choice.top_k = options_.top_k;
    choice.top_p = options_.top_p;
    choice.u = uniform01(rng_);
    return choice;
}

int32_t Sampler::sample(std::span<float> logits) {
    CHERENKOV_ASSERT(!logits.empty(), "sampling from an empty row");
    if (options_.has_penalties()) apply_penalties(logits);
    return selector_.select(logits, next_choice());
}

}  // namespace cherenkov::engine
