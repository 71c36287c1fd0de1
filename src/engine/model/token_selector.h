// The one definition of how a token is picked from a row of logits, shared by the host Sampler,
// the CPU Model and (kernel for kernel) the CUDA backend's token_select.cu: greedy argmax, or
// temperature, top-k, top-p and a draw with a uniform number u the caller took from its seeded
// RNG. Penalties are not part of it: they need the request's token counts (Sampler applies them
// to host logits first).
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace cherenkov::engine {

// How one row's token is chosen. Trivially copyable: the CUDA backend copies an array of these to
// the device as is.
struct TokenChoice {
    float temperature = 0.0F;  // <= 0: greedy (argmax); the other fields are then unused
    int32_t top_k = 0;         // 0: off
    float top_p = 1.0F;        // 1: off
    double u = 0.0;            // uniform in [0, 1), drawn by the request's Sampler

    bool greedy() const { return temperature <= 0.0F; }
};

// A request, through ForwardOptions / the MTP calls, for token ids instead of logits: one choice
// per logit row the call returns (all rows with all_logits, else the last one). The backend then
// returns ForwardResult::tokens and leaves the logits on its side (empty) unless keep_logits.
struct TokenSelection {
    std::vector<TokenChoice> rows;
    bool keep_logits = false;  // also return the logits (--check, tests)
};

// The selection order as one integer: a larger key ranks first. The high half orders the value
// (NaN below -inf, -0 equal to +0), the low half is ~index, so equal values rank the lower index
// first. Every pick below is "the largest key" of some set, which is what the device reduces.
inline uint64_t selection_key(float value, int32_t index) {
    auto bits = std::bit_cast<uint32_t>(value);
    if ((bits & 0x7FFFFFFFU) > 0x7F800000U) {
        bits = 0;  // NaN: below every number
    } else {
        if ((bits & 0x7FFFFFFFU) == 0) bits = 0;  // -0 → +0
        bits = (bits & 0x80000000U) != 0 ? ~bits : (bits | 0x80000000U);
    }
    return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFU - static_cast<uint32_t>(index));
}

// Sampling weights are integers: the float e^(s - best) (s the scaled logit, best the largest;
// computed as the double exp rounded to float, which glibc and CUDA agree on except within a
// double ulp of a float rounding point) times 2^kWeightBits, truncated. Integer sums are exact in
// any order, so the top-p cut and the draw do not depend on summation order, on how a sort
// arranges the unsorted tail, or on the backend. A token below 2^-40 of the best weighs 0: at most
// V · 2^-40 (1.4e-7 for V = 151,936) of the mass is dropped.
constexpr int kWeightBits = 40;

// Index of the largest value under selection_key's order: the lowest index of the largest
// number, NaN ignored unless every value is NaN (then 0).
int32_t argmax(std::span<const float> logits);

// Picks rows' tokens. Owns scratch reused between calls (not thread-safe).
class TokenSelector {
public:
    // The token `choice` picks from `logits` [V]:
    //   greedy: argmax.
    //   else: s = logit / temperature (float); candidates ordered by selection_key(s, id);
    //   top-k keeps the first k; if the best s is not finite, its token; weights as above (NaN:
    //   0); top-p keeps the shortest prefix whose weight reaches ceil(top_p · total) (at least
    //   one); the draw is d = min(floor(u · nucleus total), nucleus total - 1) and picks the
    //   first candidate whose cumulative weight exceeds d.
    int32_t select(std::span<const float> logits, const TokenChoice& choice);

    // tokens[r] = select(row r of logits [n_rows, vocab], selection.rows[r]). Throws InvalidInput
    // naming the field when selection.rows does not have n_rows entries.
    std::vector<int32_t> select_rows(std::span<const float> logits, int64_t n_rows, int64_t vocab,
                                     const TokenSelection& selection);

private:
    struct Candidate {
        uint64_t key;     // selection_key of the scaled logit
        float logit;      // scaled by the temperature
        uint64_t weight;  // fixed point, kWeightBits fraction bits
    };
    // Extends the sorted prefix of candidates_[0, n_kept) from n_sorted to n_needed entries;
    // returns the new length of the sorted prefix.
    size_t sort_candidates(size_t n_sorted, size_t n_needed, size_t n_kept);

    std::vector<Candidate> candidates_;
};

// selection.rows must have n_rows entries (the logit rows of a call); throws InvalidInput naming
// `what` (e.g. "ForwardOptions::select") otherwise.
void check_selection_rows(const TokenSelection& selection, int64_t n_rows, const char* what);

// The fixed-point weight of scaled logit `s` given the best one (both finite or s = -inf/NaN).
uint64_t selection_weight(float s, float best);

// The cumulative-weight target of top-p over `total`: ceil(top_p · total) in double, at most
// total. The draw's threshold over `total`: min(floor(u · total), total - 1). Both use only
// correctly rounded double operations, so the device computes the same integers.
uint64_t top_p_target(float top_p, uint64_t total);
uint64_t draw_threshold(double u, uint64_t total);

}  // namespace cherenkov::engine
