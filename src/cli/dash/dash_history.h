// The dashboard's model (docs/monitoring.md "dash"): two minutes of chart points computed from
// the changes between successive stats_summary answers, with gaps where the server did not
// answer. Counters may restart (a new server): a point is only computed between two
// observations of the same connection streak.
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>

namespace cherenkov::cli::dash {

struct ChartPoint {
    std::optional<double> read_bytes_per_second;  // completed expert-read bytes
    std::optional<double> read_wait_per_second;   // worker read seconds per second (overlap)
    std::optional<double> gpu_stage_fraction;     // of the second's decode calls; null: none
};

// Cumulative figures of one summary the rates are differences of.
struct SummaryTotals {
    double observed_at = 0.0;
    uint64_t completed_bytes = 0;
    uint64_t read_ns = 0;
    // The GPU timeline of timed decode/MTP calls and its covered part, since load (0 on the cpu);
    // a point's coverage is the ratio of their changes, so it shows that second, not the average.
    double gpu_timeline_seconds = 0.0;
    double gpu_stage_seconds = 0.0;
};

SummaryTotals summary_totals(const nlohmann::json& summary);

class DashHistory {
public:
    static constexpr size_t kPoints = 120;  // one a second: two minutes

    // A fresh observation: adds a point from the change since the previous one (none for the
    // first of a streak).
    void observe(const SummaryTotals& totals);
    // The server did not answer: a gap, and the next observation starts a new streak.
    void gap();

    const std::deque<ChartPoint>& points() const { return points_; }

private:
    void push(ChartPoint point);

    std::deque<ChartPoint> points_;
    std::optional<SummaryTotals> previous_;
};

}  // namespace cherenkov::cli::dash
