// Assembly of OpenAI-style tool calls from parsed markup.
#include "text/tool_calls/tool_call.h"

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kPreviewBytes = 40;

// A short JSON-quoted excerpt, safe for a one-line message.
std::string preview(std::string_view text) {
    std::string clipped(text.substr(0, kPreviewBytes));
    std::string quoted = Json(replace_invalid_utf8(clipped)).dump();
    if (text.size() > kPreviewBytes) quoted += "...";
    return quoted;
}

// The template writes "<parameter=NAME>\n" VALUE "\n</parameter>".
std::string_view strip_template_newlines(std::string_view value) {
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    return value;
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

Json tool_call_to_json(const ToolCall& call) {
    return Json{{"id", call.id},
                {"type", "function"},
                {"function", Json{{"name", call.name}, {"arguments", call.arguments}}}};
}

std::string tool_call_id(uint64_t seed, size_t index) {
    uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (static_cast<uint64_t>(index) + 1));
    uint64_t high = splitmix64(state);
    uint64_t low = splitmix64(state);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id = "call_";
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(high >> shift) & 0xF];
    for (int shift = 28; shift >= 0; shift -= 4) id += kHex[(low >> shift) & 0xF];
    return id;
}

ToolCall assemble_tool_call(std::string_view name, std::span<const RawParameter> params,
                            const std::map<std::string, JsonTypeSet>* param_types, std::string id,
                            std::vector<std::string>& diagnostics) {
    ToolCall call;
    call.id = std::move(id);
    call.name = replace_invalid_utf8(name);
    call.argument_values = Json::object();
    std::string where = "tool call " + preview(name);
    if (param_types == nullptr) {
        diagnostics.push_back(where +
                              ": function is not among the request's tools (kept, "
                              "arguments left as strings)");
    }
    for (const RawParameter& param : params) {
        std::string key = replace_invalid_utf8(param.name);
        std::string_view text = strip_template_newlines(param.value);
        JsonTypeSet types;
        if (param_types != nullptr) {
            auto declared = param_types->find(key);
            if (declared == param_types->end()) {
                diagnostics.push_back(where + ": parameter " + preview(param.name) +
                                      " is not declared by the tool (kept as a string)");
            } else {
                types = declared->second;
            }
        }
        ConvertedValue converted = convert_parameter_value(text, types);
        if (!converted.matches) {
            diagnostics.push_back(where + ": parameter " + preview(param.name) + " expects " +
                                  types.describe() + ", got " + preview(text) +
                                  " (kept as a string)");
        }
        if (call.argument_values.contains(key)) {
            diagnostics.push_back(where + ": parameter " + preview(param.name) +
                                  " appears more than once (the last value is kept)");
            call.argument_values.erase(key);
        }
        call.argument_values[key] = std::move(converted.value);
    }
    call.arguments = call.argument_values.dump();
    return call;
}

}  // namespace cherenkov::text
