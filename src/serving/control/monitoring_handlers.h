// The control socket's monitoring operations (status, stats_summary, stats_layers,
// stats_experts; docs/monitoring.md) over the HTTP server's copied figures and the latest engine
// observation. Nothing here touches the model: the engine thread publishes observations.
#pragma once

#include <string>

#include "serving/control/control_handlers.h"
#include "serving/http_server.h"

namespace cherenkov::serving::control {

struct ServerIdentity {
    std::string model;        // as given to serve
    std::string host;         // the HTTP address (the port is the server's, once bound)
    std::string socket_path;  // the control socket
};

// Fills status and the stats ops of `handlers` (config_* are left as they are). `server` must
// outlive the handlers. Before the first observation the stats ops answer Busy (not ready).
void add_monitoring_handlers(ControlHandlers& handlers, HttpServer& server,
                             ServerIdentity identity);

// A page of `entries` [offset, offset+limit) of a list of `total` entries: the page object with
// "offset", "total" and "next_offset" (null at the end). Entries are made by `entry(index)`.
template <typename Entry>
nlohmann::json make_page(const char* key, uint64_t total, const PageRequest& page,
                         const Entry& entry) {
    nlohmann::json entries = nlohmann::json::array();
    const uint64_t end = std::min<uint64_t>(total, page.offset + page.limit);
    for (uint64_t index = page.offset; index < end; ++index) entries.push_back(entry(index));
    nlohmann::json out = {{"offset", page.offset}, {"total", total}};
    out[key] = std::move(entries);
    out["next_offset"] = end < total ? nlohmann::json(end) : nlohmann::json(nullptr);
    return out;
}

}  // namespace cherenkov::serving::control
