// GET /metrics (docs/monitoring.md "/metrics"): the server's figures in Prometheus' text
// exposition format 0.0.4, from copies the caller took (no engine access here). Names are
// cherenkov_*; counters end in _total; bytes and seconds are base units.
#pragma once

#include <string>

#include "engine/runtime/engine_stats.h"
#include "serving/request_metrics.h"
#include "serving/session_store.h"
#include "serving/worker.h"

namespace cherenkov::serving {

struct MetricsInput {
    bool ready = false;
    const engine::EngineStats* engine = nullptr;  // null before the first observation
    WorkerCounters worker;
    SessionCounters sessions;
    RequestTotals requests;
};

std::string render_prometheus_metrics(const MetricsInput& input);

}  // namespace cherenkov::serving
