// Fuzzes one control-socket request line (serving/control/control_protocol.h): parsing must
// accept or throw cherenkov::Error, and a parsed request must dispatch to handlers that answer
// pages, whose cut must fit the frame.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "serving/control/control_protocol.h"
#include "serving/control/monitoring_handlers.h"

using namespace cherenkov::serving::control;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    ControlRequest request;
    try {
        request = parse_control_request(line);
    } catch (const cherenkov::Error&) {
        return 0;
    }
    ControlHandlers handlers;
    handlers.status = [] { return nlohmann::json{{"ready", true}}; };
    handlers.stats_layers = [](const PageRequest& page) {
        return make_page("layers", 200, page, [](uint64_t layer) {
            return nlohmann::json{{"layer", layer}, {"pad", std::string(900, 'p')}};
        });
    };
    handlers.stats_experts = [](uint32_t layer, const PageRequest& page) {
        if (layer > 3) cherenkov::throw_invalid("layer out of range");
        return make_page("experts", 512, page, [](uint64_t expert) {
            return nlohmann::json{{"expert", expert}};
        });
    };
    const nlohmann::json answer = dispatch_control_request(handlers, request);
    if (control_frame(answer).size() > kMaxFrameBytes) __builtin_trap();
    return 0;
}
