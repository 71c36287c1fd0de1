// Validated `tools`, `tool_choice` and `parallel_tool_calls` of a chat request (seed, "Tool
// calling"). Errors are InvalidInput naming the JSON path: "tools[1].function.name: ...".
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "text/tool_calls/json_type_set.h"

namespace cherenkov::text {

// One function tool. Schemas are ordered_json so the template renders properties in the
// client's order, as Python dicts keep it.
struct ToolSpec {
    std::string name;  // matches ^[A-Za-z0-9_-]{1,64}$
    std::optional<std::string> description;
    // An object schema with "type":"object" and "properties" filled in when the request left
    // them out ({"type":"object","properties":{}} when it has no parameters at all).
    nlohmann::ordered_json parameters;
    // Declared types of each entry of parameters.properties.
    std::map<std::string, JsonTypeSet> param_types;
    // The tool object exactly as the client sent it: what the chat template renders, so the
    // prompt matches transformers' apply_chat_template for the same request.
    nlohmann::ordered_json request_json;
};

enum class ToolChoice { Auto, None };

struct ToolRequest {
    std::vector<ToolSpec> tools;
    ToolChoice choice = ToolChoice::Auto;

    // Whether the model is offered the tools and its output is parsed for calls.
    bool calls_enabled() const { return !tools.empty() && choice == ToolChoice::Auto; }
};

// `tools`: an array of {"type":"function","function":{name, description?, parameters?,
// strict?}}. Unknown keys, `strict: true`, duplicate names and non-object schemas are rejected.
std::vector<ToolSpec> parse_tools(const nlohmann::ordered_json& tools);

// `tool_choice`: "auto" or "none". "required" and {"type":"function",...} are rejected because
// the checkpoint cannot be obligated to call a function.
ToolChoice parse_tool_choice(const nlohmann::ordered_json& choice);

// Reads the optional `tools`, `tool_choice` and `parallel_tool_calls` members of a chat request
// body (other members are the caller's business). JSON null counts as absent.
// parallel_tool_calls must be absent, or true while calls are enabled.
ToolRequest parse_tool_request(const nlohmann::ordered_json& body);

}  // namespace cherenkov::text
