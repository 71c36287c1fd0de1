// Log-probabilities of generated tokens for `logprobs` / `top_logprobs`: log-softmax of the
// logits of the row that chose the token (before penalties and temperature, as vLLM and
// llama.cpp report them), and the most likely alternatives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cherenkov::serving {

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0F;
};

struct LogprobEntry {
    TokenLogprob chosen;
    std::vector<TokenLogprob> top;  // most likely first; ties by lower id
};

// `top_n` alternatives (0-20) of `row` and the chosen token's log-probability.
LogprobEntry token_logprobs(std::span<const float> row, int32_t chosen, int top_n);

}  // namespace cherenkov::serving
