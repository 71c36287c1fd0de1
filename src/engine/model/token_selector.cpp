// TokenSelector (token_selector.h): the host side of the selection definition. The CUDA kernels
// in engine/cuda/token_select.cu compute the same integers; a change here must be made there.
#include "engine/model/token_selector.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {

int32_t argmax(std::span<const float> logits) {
    CHERENKOV_ASSERT(!logits.empty(), "argmax of an empty row");
    uint64_t best = selection_key(logits[0], 0);
    for (size_t index = 1; index < logits.size(); ++index) {
        best = std::max(best, selection_key(logits[index], static_cast<int32_t>(index)));
    }
    return static_cast<int32_t>(0xFFFFFFFFU - static_cast<uint32_t>(best));
}

uint64_t selection_weight(float s, float best) {
    if (std::isnan(s)) return 0;
    // The double exp rounded to float: what the device computes too (token_selector.h).
    const auto weight = static_cast<float>(std::exp(static_cast<double>(s - best)));
    return static_cast<uint64_t>(weight * 0x1p40F);
}

uint64_t top_p_target(float top_p, uint64_t total) {
    const double target = std::ceil(static_cast<double>(top_p) * static_cast<double>(total));
    return std::min(static_cast<uint64_t>(target), total);
}

uint64_t draw_threshold(double u, uint64_t total) {
    const auto draw = static_cast<uint64_t>(std::floor(u * static_cast<double>(total)));
    return std::min(draw, total - 1);
}

void check_selection_rows(const TokenSelection& selection, int64_t n_rows, const char* what) {
    if (static_cast<int64_t>(selection.rows.size()) == n_rows) return;
    throw_invalid(std::string(what) + ".rows has " + std::to_string(selection.rows.size()) +
                  " choices; the call returns " + std::to_string(n_rows) + " logit rows");
}

std::vector<int32_t> TokenSelector::select_rows(std::span<const float> logits, int64_t n_rows,
                                                int64_t vocab, const TokenSelection& selection) {
    check_selection_rows(selection, n_rows, "the token selection");
    std::vector<int32_t> tokens(static_cast<size_t>(n_rows));
    for (int64_t row = 0; row < n_rows; ++row) {
        tokens[static_cast<size_t>(row)] =
            select(logits.subspan(static_cast<size_t>(row * vocab), static_cast<size_t>(vocab)),
                   selection.rows[static_cast<size_t>(row)]);
    }
    return tokens;
}

size_t TokenSelector::sort_candidates(size_t n_sorted, size_t n_needed, size_t n_kept) {
    n_needed = std::min(n_needed, n_kept);
    if (n_needed <= n_sorted) return n_sorted;
    // Everything after the sorted prefix ranks below it: select the next n_needed - n_sorted
    // there (linear) and sort only those. Keys are distinct, so the order is total.
    const auto before = [](const Candidate& a, const Candidate& b) { return a.key > b.key; };
    const auto begin = candidates_.begin();
    std::nth_element(begin + static_cast<ptrdiff_t>(n_sorted),
                     begin + static_cast<ptrdiff_t>(n_needed),
                     begin + static_cast<ptrdiff_t>(n_kept), before);
    std::sort(begin + static_cast<ptrdiff_t>(n_sorted), begin + static_cast<ptrdiff_t>(n_needed),
              before);
    return n_needed;
}

int32_t TokenSelector::select(std::span<const float> logits, const TokenChoice& choice) {
    CHERENKOV_ASSERT(!logits.empty(), "selecting from an empty row");
    if (choice.greedy()) return argmax(logits);

    candidates_.resize(logits.size());
    for (size_t index = 0; index < logits.size(); ++index) {
        const float s = logits[index] / choice.temperature;
        candidates_[index] = {selection_key(s, static_cast<int32_t>(index)), s, 0};
    }
    const auto token_of = [](const Candidate& c) {
        return static_cast<int32_t>(0xFFFFFFFFU - static_cast<uint32_t>(c.key));
    };

    // Top-k moves the k best candidates to the front. Only the prefix that top-p and the draw
    // reach is sorted, widened as needed, so a 150k vocabulary costs O(V), not O(V log V).
    size_t n_kept = candidates_.size();
    if (choice.top_k > 0 && static_cast<size_t>(choice.top_k) < n_kept) {
        n_kept = static_cast<size_t>(choice.top_k);
        std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(n_kept),
                         candidates_.end(),
                         [](const Candidate& a, const Candidate& b) { return a.key > b.key; });
    }
    size_t n_sorted = sort_candidates(0, 256, n_kept);

    const float best = candidates_[0].logit;
    if (!std::isfinite(best)) return token_of(candidates_[0]);  // +inf, or nothing finite
    uint64_t total = 0;
    for (size_t index = 0; index < n_kept; ++index) {
        candidates_[index].weight = selection_weight(candidates_[index].logit, best);
        total += candidates_[index].weight;
    }

    // Top-p: the shortest sorted prefix whose weight reaches the target (at least one).
    size_t n_nucleus = n_kept;
    uint64_t nucleus_total = total;
    if (choice.top_p < 1.0F) {
        const uint64_t target = top_p_target(choice.top_p, total);
        uint64_t cumulative = 0;
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

    // The draw walks the nucleus in candidate order, sorting further where it has to.
    const uint64_t draw = draw_threshold(choice.u, nucleus_total);
    uint64_t cumulative = 0;
    for (size_t index = 0; index < n_nucleus; ++index) {
        if (index == n_sorted) n_sorted = sort_candidates(n_sorted, n_sorted * 4, n_nucleus);
        cumulative += candidates_[index].weight;
        if (draw < cumulative) return token_of(candidates_[index]);
    }
    return token_of(candidates_[n_nucleus - 1]);
}

}  // namespace cherenkov::engine
