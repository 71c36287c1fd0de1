#include "cli/dash/dash_history.h"

#include <algorithm>

namespace cherenkov::cli::dash {
namespace {

uint64_t unsigned_at(const nlohmann::json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

}  // namespace

SummaryTotals summary_totals(const nlohmann::json& summary) {
    SummaryTotals totals;
    totals.observed_at = summary.value("observed_at", 0.0);
    totals.completed_bytes = unsigned_at(summary, "experts_read_bytes");
    const auto total = summary.find("totals");
    if (total != summary.end() && total->is_object() && total->contains("quant")) {
        for (const nlohmann::json& quant : (*total)["quant"]) {
            for (const char* kind : {"demand", "prefetch"}) {
                if (quant.contains(kind)) totals.read_ns += unsigned_at(quant[kind], "read_ns_sum");
            }
        }
    }
    const auto phases = summary.find("phases");
    if (phases != summary.end() && phases->is_object()) {
        totals.gpu_timeline_seconds = phases->value("gpu_timeline_seconds", 0.0);
        totals.gpu_stage_seconds = phases->value("gpu_stage_seconds", 0.0);
    }
    return totals;
}

void DashHistory::observe(const SummaryTotals& totals) {
    if (previous_) {
        const double seconds = totals.observed_at - previous_->observed_at;
        // The same observation read twice (no newer one yet) adds nothing.
        if (seconds <= 0.0) return;
        ChartPoint point;
        if (totals.completed_bytes >= previous_->completed_bytes &&
            totals.read_ns >= previous_->read_ns) {
            point.read_bytes_per_second =
                static_cast<double>(totals.completed_bytes - previous_->completed_bytes) / seconds;
            point.read_wait_per_second =
                static_cast<double>(totals.read_ns - previous_->read_ns) * 1e-9 / seconds;
        }
        const double timeline = totals.gpu_timeline_seconds - previous_->gpu_timeline_seconds;
        if (timeline > 0.0) {
            const double stage = totals.gpu_stage_seconds - previous_->gpu_stage_seconds;
            point.gpu_stage_fraction = std::clamp(stage / timeline, 0.0, 1.0);
        }
        push(point);
    }
    previous_ = totals;
}

void DashHistory::gap() {
    previous_.reset();
    push(ChartPoint{});
}

void DashHistory::push(ChartPoint point) {
    points_.push_back(point);
    while (points_.size() > kPoints) points_.pop_front();
}

}  // namespace cherenkov::cli::dash
