#include "serving/control/control_protocol.h"

#include <array>
#include <utility>

#include "base/error.h"

namespace cherenkov::serving::control {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::pair<ControlOp, std::string_view>, 6> kOps = {{
    {ControlOp::Status, "status"},
    {ControlOp::StatsSummary, "stats_summary"},
    {ControlOp::StatsLayers, "stats_layers"},
    {ControlOp::StatsExperts, "stats_experts"},
    {ControlOp::ConfigShow, "config_show"},
    {ControlOp::ConfigReload, "config_reload"},
}};

bool paged(ControlOp op) {
    return op == ControlOp::StatsLayers || op == ControlOp::StatsExperts;
}

// A non-negative integer field within [min, max]; absent leaves `fallback`.
uint64_t integer_field(const Json& object, const char* key, uint64_t min, uint64_t max,
                       uint64_t fallback) {
    const auto it = object.find(key);
    if (it == object.end()) return fallback;
    if (!it->is_number_integer() ||
        (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0)) {
        throw_invalid(std::string("control request: '") + key + "' must be a non-negative integer");
    }
    const uint64_t value = it->get<uint64_t>();
    if (value < min || value > max) {
        throw_invalid(std::string("control request: '") + key + "' must be in [" +
                      std::to_string(min) + ", " + std::to_string(max) + "], got " +
                      std::to_string(value));
    }
    return value;
}

template <typename Fn>
Json guarded(std::string_view op, const Fn& fn) {
    try {
        return fn();
    } catch (const Error& e) {
        switch (e.kind()) {
            case ErrorKind::Busy: return control_error("not_ready", e.what());
            case ErrorKind::InvalidInput: return control_error("invalid_request", e.what());
            case ErrorKind::NotFound: return control_error("not_found", e.what());
            default: return control_error("failed", std::string(op) + ": " + e.what());
        }
    } catch (const std::exception& e) {
        return control_error("internal", std::string(op) + ": " + e.what());
    }
}

Json not_available(std::string_view op) {
    return control_error("not_available", "the server does not provide '" + std::string(op) + "'");
}

}  // namespace

std::string_view control_op_name(ControlOp op) {
    for (const auto& [value, name] : kOps) {
        if (value == op) return name;
    }
    throw_internal("unknown control op");
}

ControlRequest parse_control_request(std::string_view line) {
    Json object;
    try {
        object = Json::parse(line);
    } catch (const Json::parse_error& e) {
        throw_invalid(std::string("control request: not valid JSON: ") + e.what());
    }
    if (!object.is_object()) throw_invalid("control request: expected a JSON object");
    const auto op = object.find("op");
    if (op == object.end() || !op->is_string())
        throw_invalid("control request: 'op' must be a string");
    ControlRequest request;
    bool known = false;
    for (const auto& [value, name] : kOps) {
        if (name == op->get_ref<const std::string&>()) {
            request.op = value;
            known = true;
        }
    }
    if (!known) {
        throw_invalid("control request: unknown op '" + op->get<std::string>() +
                      "' (status, stats_summary, stats_layers, stats_experts, config_show, "
                      "config_reload)");
    }
    for (const auto& [key, value] : object.items()) {
        const bool allowed = key == "op" ||
                             (paged(request.op) && (key == "offset" || key == "limit")) ||
                             (request.op == ControlOp::StatsExperts && key == "layer");
        if (!allowed) {
            throw_invalid("control request: unknown field '" + key + "' for op '" +
                          std::string(control_op_name(request.op)) + "'");
        }
    }
    if (paged(request.op)) {
        request.page.offset = integer_field(object, "offset", 0, UINT32_MAX, 0);
        request.page.limit = static_cast<uint32_t>(
            integer_field(object, "limit", 1, kMaxPageLimit, kDefaultPageLimit));
    }
    if (request.op == ControlOp::StatsExperts) {
        if (!object.contains("layer")) throw_invalid("control request: 'layer' is required");
        request.layer = static_cast<uint32_t>(integer_field(object, "layer", 0, UINT32_MAX, 0));
    }
    return request;
}

Json control_error(std::string_view code, const std::string& message) {
    return {{"error", {{"code", code}, {"message", message}}}};
}

void fit_page(Json& page, const std::string& entries_key, uint64_t offset, size_t max_bytes) {
    Json& entries = page[entries_key];
    CHERENKOV_ASSERT(entries.is_array(), "a page's entries are an array");
    bool cut = false;
    // Serializing once per dropped entry is quadratic in the worst case, but pages hold at most
    // 128 entries; halve first while far over, then drop one at a time.
    while (control_frame(page).size() > max_bytes) {
        if (entries.empty())
            throw_internal("an empty page of '" + entries_key + "' does not fit the control frame");
        const size_t keep =
            control_frame(page).size() > 2 * max_bytes ? entries.size() / 2 : entries.size() - 1;
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(keep), entries.end());
        cut = true;
    }
    if (cut) page["next_offset"] = offset + entries.size();
}

std::string control_frame(const Json& answer) {
    return answer.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json dispatch_control_request(const ControlHandlers& handlers, const ControlRequest& request) {
    const std::string_view name = control_op_name(request.op);
    switch (request.op) {
        case ControlOp::Status:
            if (!handlers.status) return not_available(name);
            return guarded(name, handlers.status);
        case ControlOp::StatsSummary:
            if (!handlers.stats_summary) return not_available(name);
            return guarded(name, handlers.stats_summary);
        case ControlOp::StatsLayers:
            if (!handlers.stats_layers) return not_available(name);
            return guarded(name, [&] {
                Json page = handlers.stats_layers(request.page);
                fit_page(page, "layers", request.page.offset);
                return page;
            });
        case ControlOp::StatsExperts:
            if (!handlers.stats_experts) return not_available(name);
            return guarded(name, [&] {
                Json page = handlers.stats_experts(request.layer, request.page);
                fit_page(page, "experts", request.page.offset);
                return page;
            });
        case ControlOp::ConfigShow:
            if (!handlers.config_show) return not_available(name);
            return guarded(name, handlers.config_show);
        case ControlOp::ConfigReload:
            if (!handlers.config_reload) return not_available(name);
            return guarded(name, handlers.config_reload);
    }
    return control_error("internal", "unknown control op");
}

}  // namespace cherenkov::serving::control
