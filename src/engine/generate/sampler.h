// Token selection from one row of logits (seed "Generation options"). Order of operations, as in
// llama.cpp and vLLM: penalties (repetition, then presence and frequency; counting prompt and
// output tokens), temperature, top-k, top-p, then a draw from the seeded RNG. Temperature 0
// (the default) is greedy: argmax, lowest index on ties, and the only mode in which MTP drafts
// can be verified. Everything after the penalties is the shared TokenSelector definition, so a
// backend that picks tokens itself (TokenSelection) returns the same token for the same u.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>

#include "engine/model/token_selector.h"

namespace cherenkov::engine {

struct SamplingOptions {
    float temperature = 0.0F;         // 0: greedy
    int top_k = 0;                    // 0: off
    float top_p = 1.0F;               // 1: off
    float presence_penalty = 0.0F;    // subtract once per distinct seen token
    float frequency_penalty = 0.0F;   // subtract count · penalty
    float repetition_penalty = 1.0F;  // CTRL style: positive logits /= p, negative *= p
    uint64_t seed = 0;

    bool greedy() const { return temperature <= 0.0F; }
    bool has_penalties() const {
        return presence_penalty != 0.0F || frequency_penalty != 0.0F || repetition_penalty != 1.0F;
    }
    // MTP verification needs plain greedy decoding.
    bool allows_speculation() const { return greedy() && !has_penalties(); }
};

// Throws InvalidInput naming the option for values outside their ranges (temperature < 0,
// top_k < 0, top_p outside (0, 1], repetition_penalty ≤ 0, non-finite values).
void validate_sampling_options(const SamplingOptions& options);

// One request's sampler: owns the RNG and the counts of seen tokens.
class Sampler {
public:
    explicit Sampler(const SamplingOptions& options);

    // Records tokens that count for penalties (the prompt, then each emitted token).
    void observe(std::span<const int32_t> tokens);
    void observe(int32_t token);

    // Picks the next token: penalties applied to `logits` in place, then the TokenSelector with
    // next_choice().
    int32_t sample(std::span<float> logits);

    // The choice for the next token, for a backend that selects it (valid without penalties:
    // those need the host logits). Draws u from the RNG unless greedy, exactly as sample() does,
    // so both routes consume the same random sequence.
    TokenChoice next_choice();

    const SamplingOptions& options() const { return options_; }

    // The random stream: a session commits it after a turn and the next turn continues it
    // (seed "Sampling"). Greedy selection never draws from it.
    const std::mt19937_64& rng() const { return rng_; }
    void set_rng(const std::mt19937_64& rng) { rng_ = rng; }

private:
    void apply_penalties(std::span<float> logits) const;

    SamplingOptions options_;
    std::mt19937_64 rng_;
    std::unordered_map<int32_t, int32_t> counts_;
    TokenSelector selector_;
};

}  // namespace cherenkov::engine
