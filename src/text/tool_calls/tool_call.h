// One parsed tool call in OpenAI form, and its assembly from the raw name and parameter texts
// the model wrote (type conversion against the tool's schema, with diagnostics).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tool_calls/json_type_set.h"

namespace cherenkov::text {

struct ToolCall {
    std::string id;         // "call_" + 24 lowercase hex digits, from tool_call_id()
    std::string name;       // function.name (valid UTF-8)
    std::string arguments;  // function.arguments: the argument object as JSON text
    // The same object decoded, keys in the order the model wrote them (for session history).
    nlohmann::ordered_json argument_values;

    bool operator==(const ToolCall&) const = default;
};

// {"id":..., "type":"function", "function":{"name":..., "arguments":...}}
nlohmann::ordered_json tool_call_to_json(const ToolCall& call);

// Deterministic id of the index-th call of a request whose parser was given `seed`.
std::string tool_call_id(uint64_t seed, size_t index);

// One <parameter=NAME>VALUE</parameter> as written, VALUE still with the template's newlines.
struct RawParameter {
    std::string_view name;
    std::string_view value;
};

// Builds the call. `param_types` is the tool's map from ToolSpec, or null for a function the
// request did not declare (its arguments stay strings). Strips one leading and one trailing
// newline of each value, converts it to the declared type, and appends one line to
// `diagnostics` for an unknown function, an undeclared or repeated parameter (the last value
// wins), and a value that fits no declared type (kept as a string).
ToolCall assemble_tool_call(std::string_view name, std::span<const RawParameter> params,
                            const std::map<std::string, JsonTypeSet>* param_types, std::string id,
                            std::vector<std::string>& diagnostics);

}  // namespace cherenkov::text
