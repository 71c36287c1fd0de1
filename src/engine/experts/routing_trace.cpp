#include "engine/experts/routing_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <ostream>
#include <sstream>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// splitmix64: a tiny generator whose output is the same on every platform.
class Random {
public:
    explicit Random(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
    uint64_t below(uint64_t n) { return next() % n; }

private:
    uint64_t state_;
};

[[noreturn]] void bad_line(const std::string& source_name, int64_t line_number,
                           const std::string& why) {
    throw_invalid(source_name + ": line " + std::to_string(line_number) + ": " + why);
}

RoutedExpert parse_choice(const std::string& token, const std::string& source_name,
                          int64_t line_number) {
    const auto colon = token.find(':');
    RoutedExpert choice;
    const char* end = token.data() + token.size();
    if (colon == std::string::npos) bad_line(source_name, line_number, "expected expert:weight");
    const auto expert_end = std::from_chars(token.data(), token.data() + colon, choice.expert);
    const auto weight_end = std::from_chars(token.data() + colon + 1, end, choice.weight);
    if (expert_end.ec != std::errc() || expert_end.ptr != token.data() + colon ||
        weight_end.ec != std::errc() || weight_end.ptr != end || choice.expert < 0 ||
        !std::isfinite(choice.weight)) {
        bad_line(source_name, line_number, "malformed choice '" + token + "'");
    }
    return choice;
}

// The one place a trace line is formatted: "step layer row expert:weight ...", floats as the
// stream's defaults print them.
template <typename Choice>
void write_line(std::ostream& out, int64_t step, int64_t layer, size_t row, size_t n_choices,
                Choice&& choice) {
    out << step << ' ' << layer << ' ' << row;
    for (size_t index = 0; index < n_choices; ++index) {
        const RoutedExpert routed = choice(index);
        out << ' ' << routed.expert << ':' << routed.weight;
    }
    out << '\n';
}

}  // namespace

std::vector<ExpertRequest> TraceLayerStep::union_requests() const {
    std::vector<ExpertRequest> requests;
    for (const std::vector<RoutedExpert>& row : rows) {
        for (const RoutedExpert& choice : row) {
            auto found =
                std::find_if(requests.begin(), requests.end(),
                             [&](const ExpertRequest& r) { return r.expert == choice.expert; });
            if (found == requests.end()) {
                requests.push_back(ExpertRequest{choice.expert, choice.weight});
            } else {
                found->max_weight = std::max(found->max_weight, choice.weight);
            }
        }
    }
    return requests;
}

RoutingTrace parse_routing_trace(std::istream& in, const std::string& source_name) {
    RoutingTrace trace;
    std::string line;
    int64_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        std::istringstream fields(line);
        int64_t step = -1;
        int64_t layer = -1;
        int64_t row = -1;
        if (!(fields >> step >> layer >> row) || step < 0 || layer < 0 || row < 0) {
            bad_line(source_name, line_number, "expected 'step layer row expert:weight ...'");
        }
        const bool new_group = trace.layer_steps.empty() || trace.layer_steps.back().step != step ||
                               trace.layer_steps.back().layer != layer;
        if (new_group) trace.layer_steps.push_back(TraceLayerStep{step, layer, {}});
        TraceLayerStep& group = trace.layer_steps.back();
        if (row != static_cast<int64_t>(group.rows.size())) {
            bad_line(source_name, line_number,
                     "row " + std::to_string(row) + " out of order (expected " +
                         std::to_string(group.rows.size()) + ")");
        }
        std::vector<RoutedExpert>& choices = group.rows.emplace_back();
        std::string token;
        while (fields >> token) {
            choices.push_back(parse_choice(token, source_name, line_number));
            trace.n_experts = std::max<int64_t>(trace.n_experts, choices.back().expert + 1);
        }
        if (choices.empty()) bad_line(source_name, line_number, "row without experts");
        trace.n_layers = std::max(trace.n_layers, layer + 1);
    }
    return trace;
}

void write_routing_trace(std::ostream& out, const RoutingTrace& trace) {
    out << "# step layer row expert:weight ...\n";
    for (const TraceLayerStep& group : trace.layer_steps) {
        for (size_t row = 0; row < group.rows.size(); ++row) {
            const std::vector<RoutedExpert>& choices = group.rows[row];
            write_line(out, group.step, group.layer, row, choices.size(),
                       [&](size_t index) { return choices[index]; });
        }
    }
}

void write_trace_layer(std::ostream& out, int64_t step, int64_t layer, int64_t top_k,
                       std::span<const int32_t> experts, std::span<const float> weights) {
    CHERENKOV_ASSERT(top_k > 0 && experts.size() == weights.size() &&
                         experts.size() % static_cast<size_t>(top_k) == 0,
                     "routing of whole rows, a weight per expert");
    const auto k = static_cast<size_t>(top_k);
    for (size_t row = 0; row < experts.size() / k; ++row) {
        write_line(out, step, layer, row, k, [&](size_t index) {
            return RoutedExpert{experts[row * k + index], weights[row * k + index]};
        });
    }
}

RoutingTrace make_synthetic_trace(const SyntheticTraceOptions& options) {
    if (options.top_k < 1 || options.top_k > options.n_experts || options.n_rows < 1 ||
        options.reuse < 0.0 || options.reuse >= 1.0) {
        throw_invalid("synthetic trace: need 1 <= top_k <= n_experts, n_rows >= 1, 0 <= reuse < 1");
    }
    Random random(options.seed);
    RoutingTrace trace;
    trace.n_layers = options.n_layers;
    trace.n_experts = options.n_experts;
    const auto n_experts = static_cast<size_t>(options.n_experts);

    // Cumulative Zipf weights over ranks, and a random rank → expert order per layer.
    std::vector<double> cumulative(n_experts);
    double total = 0.0;
    for (size_t rank = 0; rank < n_experts; ++rank) {
        total += 1.0 / std::pow(static_cast<double>(rank + 1), options.zipf_exponent);
        cumulative[rank] = total;
    }
    std::vector<std::vector<int32_t>> order(static_cast<size_t>(options.n_layers));
    for (std::vector<int32_t>& experts : order) {
        experts.resize(n_experts);
        for (size_t expert = 0; expert < n_experts; ++expert) {
            experts[expert] = static_cast<int32_t>(expert);
        }
        for (size_t index = n_experts - 1; index > 0; --index) {
            std::swap(experts[index], experts[random.below(index + 1)]);
        }
    }
    std::vector<std::vector<int32_t>> previous(static_cast<size_t>(options.n_layers));

    for (int64_t step = 0; step < options.n_steps; ++step) {
        for (int64_t layer = 0; layer < options.n_layers; ++layer) {
            TraceLayerStep group{step, layer, {}};
            std::vector<int32_t>& used_before = previous[static_cast<size_t>(layer)];
            std::vector<int32_t> used_now;
            for (int64_t row = 0; row < options.n_rows; ++row) {
                std::vector<int32_t> picked;
                while (static_cast<int64_t>(picked.size()) < options.top_k) {
                    int32_t expert = 0;
                    if (!used_before.empty() && random.uniform() < options.reuse) {
                        expert = used_before[random.below(used_before.size())];
                    } else {
                        const double target = random.uniform() * total;
                        const auto rank = static_cast<size_t>(
                            std::lower_bound(cumulative.begin(), cumulative.end(), target) -
                            cumulative.begin());
                        expert = order[static_cast<size_t>(layer)][std::min(rank, n_experts - 1)];
                    }
                    if (std::find(picked.begin(), picked.end(), expert) != picked.end()) continue;
                    picked.push_back(expert);
                }
                // Descending weights summing to 1: w_i ∝ u_i sorted, floored to keep them apart.
                std::vector<double> raw(picked.size());
                double sum = 0.0;
                for (double& value : raw) sum += (value = 0.05 + random.uniform());
                std::sort(raw.begin(), raw.end(), std::greater<>());
                std::vector<RoutedExpert>& choices = group.rows.emplace_back();
                for (size_t index = 0; index < picked.size(); ++index) {
                    choices.push_back(
                        RoutedExpert{picked[index], static_cast<float>(raw[index] / sum)});
                    used_now.push_back(picked[index]);
                }
            }
            used_before = std::move(used_now);
            trace.layer_steps.push_back(std::move(group));
        }
    }
    return trace;
}

}  // namespace cherenkov::engine
