// The control socket's wire format (docs/monitoring.md "Control socket"): one JSON object per
// line each way. Requests are {"op": NAME} plus, for the paged ops, "offset" and "limit" (and
// "layer" for stats_experts). Answers are the operation's object, or {"error": {"code",
// "message"}}. Frames are at most 64 KiB, newline included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "serving/control/control_handlers.h"

namespace cherenkov::serving::control {

inline constexpr size_t kMaxFrameBytes = 64 * 1024;
inline constexpr uint32_t kMaxPageLimit = 128;
inline constexpr uint32_t kDefaultPageLimit = 64;

enum class ControlOp { Status, StatsSummary, StatsLayers, StatsExperts, ConfigShow, ConfigReload };

struct ControlRequest {
    ControlOp op = ControlOp::Status;
    PageRequest page;    // paged ops only
    uint32_t layer = 0;  // stats_experts only
};

std::string_view control_op_name(ControlOp op);

// Parses one request line (without its newline). Throws InvalidInput naming the field for
// malformed JSON, an unknown op, unknown keys, or an offset/limit/layer of the wrong type or out of
// range (limit 1-128).
ControlRequest parse_control_request(std::string_view line);

// {"error": {"code": CODE, "message": MESSAGE}}.
nlohmann::json control_error(std::string_view code, const std::string& message);

// Runs the request's handler; never throws: handler errors become error answers (Busy →
// "not_ready", InvalidInput → "invalid_request", others → "failed"; a null handler →
// "not_available"). Paged answers are cut to fit one frame (fit_page).
nlohmann::json dispatch_control_request(const ControlHandlers& handlers,
                                        const ControlRequest& request);

// Drops entries from the end of page[entries_key] until the serialized page plus its newline
// fits `max_bytes`, and sets "next_offset" to the first entry left out (the handler's own
// next_offset, or null at the end, when nothing was cut). `offset` is the page's first entry.
// Throws Internal when even an empty page does not fit.
void fit_page(nlohmann::json& page, const std::string& entries_key, uint64_t offset,
              size_t max_bytes = kMaxFrameBytes);

// One answer as a frame: compact JSON, invalid UTF-8 replaced, newline-terminated.
std::string control_frame(const nlohmann::json& answer);

}  // namespace cherenkov::serving::control
