#include "serving/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cherenkov::serving {

LogprobEntry token_logprobs(std::span<const float> row, int32_t chosen, int top_n) {
    // log p = x - (max + log Σ e^(x - max)), in double so the sum over a large vocabulary does
    // not lose the small terms.
    const float best = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (const float x : row) sum += std::exp(static_cast<double>(x) - best);
    const double log_z = static_cast<double>(best) + std::log(sum);
    const auto logprob = [&](int32_t id) {
        return static_cast<float>(static_cast<double>(row[static_cast<size_t>(id)]) - log_z);
    };
    LogprobEntry entry;
    entry.chosen = {chosen, logprob(chosen)};
    const auto n = std::min<size_t>(static_cast<size_t>(std::max(top_n, 0)), row.size());
    if (n == 0) return entry;
    std::vector<int32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](int32_t a, int32_t b) {
                          const float xa = row[static_cast<size_t>(a)];
                          const float xb = row[static_cast<size_t>(b)];
                          return xa != xb ? xa > xb : a < b;
                      });
    for (size_t i = 0; i < n; ++i) entry.top.push_back({order[i], logprob(order[i])});
    return entry;
}

}  // namespace cherenkov::serving
