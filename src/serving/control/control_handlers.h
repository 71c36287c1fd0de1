// What the control socket can answer: one function per operation, filled by `serve`.
// The server calls them on its control thread; each must return quickly from copied state and
// never wait on the engine worker or the GPU (docs/style.md 2.6). A null function answers
// {"error": {"code": "not_available", ...}} naming the operation.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

namespace cherenkov::serving::control {

// One page request of a paged operation. `limit` is already validated (1-128); a handler may
// return fewer entries, and the server cuts pages further to fit the 64 KiB frame.
struct PageRequest {
    uint64_t offset = 0;
    uint32_t limit = 64;
};

struct ControlHandlers {
    // {"ready": bool, ...}; must work while the model loads (ready: false).
    std::function<nlohmann::json()> status;
    // The stats ops throw Error(Busy, "...not ready...") while the model loads.
    std::function<nlohmann::json()> stats_summary;
    // {"observed_at": ..., "n_layers": N, "layers": [...], "next_offset": N|null}
    std::function<nlohmann::json(const PageRequest&)> stats_layers;
    // {"observed_at": ..., "layer": L, "n_experts": N, "experts": [...], "next_offset": N|null}
    std::function<nlohmann::json(uint32_t layer, const PageRequest&)> stats_experts;
    // Configuration (filled by the configuration code in cmd_serve.cpp).
    std::function<nlohmann::json()> config_show;
    std::function<nlohmann::json()> config_reload;
};

}  // namespace cherenkov::serving::control
