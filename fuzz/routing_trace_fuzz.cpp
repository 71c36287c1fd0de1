// Fuzzes the routing-trace text parser (engine/experts/routing_trace.h): any bytes must parse or
// fail with cherenkov::Error, and a parsed trace must survive a write/parse round trip.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "base/error.h"
#include "engine/experts/routing_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::engine;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try {
        const RoutingTrace trace = parse_routing_trace(in, "fuzz");
        std::ostringstream out;
        write_routing_trace(out, trace);
        std::istringstream again(out.str());
        const RoutingTrace reread = parse_routing_trace(again, "round trip");
        if (reread.layer_steps.size() != trace.layer_steps.size()) __builtin_trap();
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
