// Request validation of tools and tool_choice (seed, "Tool calling").
#include "text/tool_calls/tool_spec.h"

#include <set>
#include <string_view>

#include "base/error.h"

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxNameBytes = 64;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
    throw_invalid(path + ": " + message);
}

std::string member_path(const std::string& path, std::string_view member) {
    std::string result = path;
    result += '.';
    result += member;
    return result;
}

std::string type_name(const Json& value) {
    return value.type_name();
}

// Quoted and clipped so a hostile value cannot flood the error message.
std::string quoted(const Json& value) {
    std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

void check_keys(const Json& object, std::initializer_list<std::string_view> allowed,
                const std::string& path) {
    for (const auto& [key, value] : object.items()) {
        bool known = false;
        for (std::string_view name : allowed) known = known || key == name;
        if (!known) fail(member_path(path, key), "unknown field");
    }
}

std::string parse_name(const Json& function, const std::string& path) {
    auto name = function.find("name");
    if (name == function.end()) fail(path + ".name", "missing");
    if (!name->is_string()) fail(path + ".name", "must be a string, got " + type_name(*name));
    const std::string& text = name->get_ref<const std::string&>();
    bool valid = !text.empty() && text.size() <= kMaxNameBytes;
    for (char c : text) valid = valid && is_name_char(c);
    if (!valid) {
        fail(path + ".name", "must match ^[a-zA-Z0-9_-]{1,64}$, got " + quoted(*name));
    }
    return text;
}

std::optional<std::string> parse_description(const Json& function, const std::string& path) {
    auto description = function.find("description");
    if (description == function.end() || description->is_null()) return std::nullopt;
    if (!description->is_string()) {
        fail(path + ".description", "must be a string, got " + type_name(*description));
    }
    return description->get<std::string>();
}

void check_strict(const Json& function, const std::string& path) {
    auto strict = function.find("strict");
    if (strict == function.end() || strict->is_null()) return;
    if (!strict->is_boolean()) fail(path + ".strict", "must be a boolean");
    if (strict->get<bool>()) {
        fail(path + ".strict", "strict: true is not supported (output is not grammar-constrained)");
    }
}

// Checks the parameters schema and fills tool.parameters and tool.param_types.
void parse_parameters(const Json& function, const std::string& path, ToolSpec& tool) {
    auto parameters = function.find("parameters");
    if (parameters == function.end() || parameters->is_null()) {
        tool.parameters = Json{{"type", "object"}, {"properties", Json::object()}};
        return;
    }
    std::string schema_path = path + ".parameters";
    if (!parameters->is_object()) {
        fail(schema_path, "must be an object schema, got " + type_name(*parameters));
    }
    auto type = parameters->find("type");
    if (type != parameters->end() && (!type->is_string() || *type != "object")) {
        fail(schema_path + ".type", "must be \"object\", got " + quoted(*type));
    }
    tool.parameters = *parameters;
    if (type == parameters->end()) tool.parameters["type"] = "object";
    auto properties = parameters->find("properties");
    if (properties == parameters->end()) {
        tool.parameters["properties"] = Json::object();
    } else if (!properties->is_object()) {
        fail(schema_path + ".properties", "must be an object, got " + type_name(*properties));
    } else {
        for (const auto& [name, schema] : properties->items()) {
            if (!schema.is_object() && !schema.is_boolean()) {
                fail(member_path(schema_path + ".properties", name),
                     "must be a schema object, got " + type_name(schema));
            }
            tool.param_types[name] = json_types_of_schema(schema);
        }
    }
    auto required = parameters->find("required");
    if (required == parameters->end()) return;
    if (!required->is_array()) fail(schema_path + ".required", "must be an array of strings");
    for (size_t index = 0; index < required->size(); ++index) {
        if (!(*required)[index].is_string()) {
            fail(schema_path + ".required[" + std::to_string(index) + "]", "must be a string");
        }
    }
}

ToolSpec parse_tool(const Json& tool, const std::string& path) {
    if (!tool.is_object()) fail(path, "must be an object, got " + type_name(tool));
    check_keys(tool, {"type", "function"}, path);
    auto type = tool.find("type");
    if (type == tool.end()) fail(path + ".type", "missing (must be \"function\")");
    if (!type->is_string() || *type != "function") {
        fail(path + ".type", "must be \"function\", got " + quoted(*type));
    }
    auto function = tool.find("function");
    if (function == tool.end()) fail(path + ".function", "missing");
    std::string function_path = path + ".function";
    if (!function->is_object()) {
        fail(function_path, "must be an object, got " + type_name(*function));
    }
    check_keys(*function, {"name", "description", "parameters", "strict"}, function_path);
    ToolSpec spec;
    spec.name = parse_name(*function, function_path);
    spec.description = parse_description(*function, function_path);
    check_strict(*function, function_path);
    parse_parameters(*function, function_path, spec);
    spec.request_json = tool;
    return spec;
}

}  // namespace

std::vector<ToolSpec> parse_tools(const Json& tools) {
    if (!tools.is_array()) fail("tools", "must be an array, got " + type_name(tools));
    std::vector<ToolSpec> specs;
    std::set<std::string> names;
    for (size_t index = 0; index < tools.size(); ++index) {
        std::string path = "tools[" + std::to_string(index) + "]";
        ToolSpec spec = parse_tool(tools[index], path);
        if (!names.insert(spec.name).second) {
            fail(path + ".function.name", "duplicate function name \"" + spec.name + "\"");
        }
        specs.push_back(std::move(spec));
    }
    return specs;
}

ToolChoice parse_tool_choice(const Json& choice) {
    if (choice.is_string()) {
        const std::string& text = choice.get_ref<const std::string&>();
        if (text == "auto") return ToolChoice::Auto;
        if (text == "none") return ToolChoice::None;
        if (text == "required") {
            fail("tool_choice",
                 "\"required\" is not supported: the checkpoint cannot be obligated to call a "
                 "function (use \"auto\" or \"none\")");
        }
        fail("tool_choice", "must be \"auto\" or \"none\", got " + quoted(choice));
    }
    if (choice.is_object()) {
        fail("tool_choice",
             "choosing a specific function is not supported: the checkpoint cannot be obligated "
             "to call a function (use \"auto\" or \"none\")");
    }
    fail("tool_choice", "must be \"auto\" or \"none\", got " + type_name(choice));
}

ToolRequest parse_tool_request(const Json& body) {
    ToolRequest request;
    if (!body.is_object()) return request;
    if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
        request.tools = parse_tools(*tools);
    }
    if (auto choice = body.find("tool_choice"); choice != body.end() && !choice->is_null()) {
        request.choice = parse_tool_choice(*choice);
    }
    auto parallel = body.find("parallel_tool_calls");
    if (parallel == body.end() || parallel->is_null()) return request;
    if (!parallel->is_boolean()) {
        fail("parallel_tool_calls", "must be a boolean, got " + type_name(*parallel));
    }
    if (!parallel->get<bool>()) {
        fail("parallel_tool_calls", "only true is supported (the model may emit several calls)");
    }
    if (!request.calls_enabled()) {
        fail("parallel_tool_calls",
             "allowed only while tools are enabled (non-empty tools and tool_choice \"auto\")");
    }
    return request;
}

}  // namespace cherenkov::text
