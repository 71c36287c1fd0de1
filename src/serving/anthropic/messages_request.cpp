#include "serving/anthropic/messages_request.h"

#include <limits>
#include <set>

#include "base/error.h"
#include "serving/api_error.h"

namespace cherenkov::serving::anthropic {
namespace {

using Json = BodyJson;

std::string at(const std::string& path, size_t index) {
    return path + "[" + std::to_string(index) + "]";
}

// Fields that change nothing for one local model: metadata.user_id, prompt-cache markers (the
// prefix cache works on every request), and the capacity tier.
const std::set<std::string, std::less<>> kIgnored = {"metadata", "cache_control", "service_tier"};

struct Refused {
    const char* field;
    const char* why;
};
constexpr Refused kRefused[] = {
    {"thinking", "extended thinking is not supported: the template is rendered with thinking off"},
    {"output_config", "output configuration (structured output, effort) is not supported"},
    {"output_format", "structured output is not supported"},
    {"container", "containers (code execution) are not supported"},
    {"mcp_servers", "MCP servers are not supported"},
    {"context_management", "context management is not supported"},
    {"inference_geo", "inference regions do not apply to a local server"},
    {"speed", "speed modes are not supported"},
    {"diagnostics", "diagnostics are not supported"},
};

// Keys of an object other than `allowed` are errors naming the key; keys in `ignored` are
// accepted and change nothing.
void check_keys(const Json& object, const std::string& path,
                std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : object.items()) {
        bool known = false;
        for (std::string_view name : allowed) known = known || key == name;
        if (!known) throw_bad_field(path + "." + key, "unknown field", "unknown_parameter");
    }
}

const Json& required_member(const Json& object, const std::string& path, const char* key) {
    const Json* v = member(object, key);
    if (v == nullptr) throw_bad_field(path + "." + key, "is required");
    return *v;
}

// `citations` on a text block the client sends back: nothing to honour when empty.
void check_citations(const Json& block, const std::string& path) {
    const Json* citations = member(block, "citations");
    if (citations == nullptr) return;
    if (!citations->is_array()) throw_bad_field(path + ".citations", "must be an array");
    if (!citations->empty()) {
        throw_bad_field(path + ".citations", "citations are not supported",
                        "unsupported_parameter");
    }
}

// A block type the server cannot honour: named, with the reason.
[[noreturn]] void refuse_block(const std::string& type, const std::string& path) {
    if (type == "image") {
        throw_bad_field(path + ".type", "image blocks are not supported (the model reads text)",
                        "unsupported_parameter");
    }
    if (type == "document" || type == "search_result") {
        throw_bad_field(path + ".type", type + " blocks are not supported (send their text)",
                        "unsupported_parameter");
    }
    if (type == "thinking" || type == "redacted_thinking") {
        throw_bad_field(path + ".type",
                        type +
                            " blocks are not supported: the template is rendered with "
                            "thinking off",
                        "unsupported_parameter");
    }
    throw_bad_field(path + ".type", "unsupported content block type '" + type + "'",
                    "unsupported_parameter");
}

std::string block_type(const Json& block, const std::string& path) {
    if (!block.is_object()) throw_bad_field(path, "must be a content block object");
    return string_field(required_member(block, path, "type"), path + ".type");
}

// A message's consecutive text blocks are one text, as Anthropic reads them; a string, not a list
// of parts, because many chat templates render string content only.
std::string join_text(const std::vector<text::ContentPart>& parts) {
    std::string out;
    for (const text::ContentPart& part : parts) out += part.text;
    return out;
}

text::ContentPart text_block(const Json& block, const std::string& path) {
    check_keys(block, path, {"type", "text", "cache_control", "citations"});
    check_citations(block, path);
    return {string_field(required_member(block, path, "text"), path + ".text")};
}

// `system` and a tool_result's `content`: a string or a list of text blocks, whose texts are
// joined (see join_text).
std::string text_content(const Json& value, const std::string& path) {
    if (value.is_string()) return value.get<std::string>();
    if (!value.is_array()) throw_bad_field(path, "must be a string or an array of text blocks");
    std::vector<text::ContentPart> parts;
    for (size_t i = 0; i < value.size(); ++i) {
        const std::string block_path = at(path, i);
        const std::string type = block_type(value[i], block_path);
        if (type != "text") refuse_block(type, block_path);
        parts.push_back(text_block(value[i], block_path));
    }
    return join_text(parts);
}

text::ChatMessage tool_result(const Json& block, const std::string& path,
                              const std::set<std::string>& tool_use_ids) {
    check_keys(block, path, {"type", "tool_use_id", "content", "is_error", "cache_control"});
    text::ChatMessage m;
    m.role = text::Role::Tool;
    const std::string id =
        string_field(required_member(block, path, "tool_use_id"), path + ".tool_use_id");
    if (tool_use_ids.count(id) == 0) {
        throw_bad_field(path + ".tool_use_id",
                        "no earlier tool_use block has id '" + id.substr(0, 80) + "'");
    }
    m.tool_call_id = id;
    // The result's text is what the template renders; is_error is for the client's bookkeeping
    // (the text says what failed), so it is checked and otherwise changes nothing.
    if (const Json* v = member(block, "is_error")) boolean_field(*v, path + ".is_error");
    const Json* content = member(block, "content");
    m.content = content == nullptr ? std::string() : text_content(*content, path + ".content");
    return m;
}

text::MessageToolCall tool_use(const Json& block, const std::string& path,
                               std::set<std::string>& tool_use_ids) {
    check_keys(block, path, {"type", "id", "name", "input", "cache_control", "caller"});
    text::MessageToolCall call;
    call.id = string_field(required_member(block, path, "id"), path + ".id");
    if (call.id.empty()) throw_bad_field(path + ".id", "must not be empty");
    call.name = string_field(required_member(block, path, "name"), path + ".name");
    const Json& input = required_member(block, path, "input");
    if (!input.is_object()) throw_bad_field(path + ".input", "must be an object");
    call.arguments = input;
    tool_use_ids.insert(call.id);
    return call;
}

// One Anthropic message becomes one chat message, except that a user message's tool_result
// blocks become tool messages (in order, text between them a user message).
void add_message(const Json& message, const std::string& path, std::set<std::string>& tool_use_ids,
                 std::vector<text::ChatMessage>& out) {
    if (!message.is_object()) throw_bad_field(path, "must be an object with role and content");
    check_keys(message, path, {"role", "content"});
    const std::string role = string_field(required_member(message, path, "role"), path + ".role");
    if (role != "user" && role != "assistant") {
        throw_bad_field(path + ".role", "must be \"user\" or \"assistant\", got '" +
                                            role.substr(0, 40) +
                                            "' (the system prompt is the top-level system field)");
    }
    const bool user = role == "user";
    const Json& content = required_member(message, path, "content");
    text::ChatMessage m;
    m.role = user ? text::Role::User : text::Role::Assistant;
    if (content.is_string()) {
        m.content = content.get<std::string>();
        out.push_back(std::move(m));
        return;
    }
    const std::string content_path = path + ".content";
    if (!content.is_array() || content.empty()) {
        throw_bad_field(content_path, "must be a string or a non-empty array of content blocks");
    }
    std::vector<text::ContentPart> parts;
    const auto flush_text = [&] {
        if (parts.empty()) return;
        text::ChatMessage text_message;
        text_message.role = text::Role::User;
        text_message.content = join_text(parts);
        parts.clear();
        out.push_back(std::move(text_message));
    };
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string block_path = at(content_path, i);
        const std::string type = block_type(content[i], block_path);
        if (type == "text") {
            parts.push_back(text_block(content[i], block_path));
        } else if (type == "tool_result" && user) {
            flush_text();
            out.push_back(tool_result(content[i], block_path, tool_use_ids));
        } else if (type == "tool_use" && !user) {
            m.tool_calls.push_back(tool_use(content[i], block_path, tool_use_ids));
        } else if (type == "tool_result" || type == "tool_use") {
            throw_bad_field(block_path + ".type", type + " blocks belong in " +
                                                      (user ? "assistant" : "user") + " messages");
        } else {
            refuse_block(type, block_path);
        }
    }
    if (user) {
        flush_text();
        return;
    }
    // A call-only reply has no content, as the OpenAI endpoint's null content.
    if (!parts.empty()) m.content = join_text(parts);
    out.push_back(std::move(m));
}

std::vector<text::ChatMessage> parse_conversation(const Json& json) {
    std::vector<text::ChatMessage> messages;
    if (const Json* system = member(json, "system")) {
        text::ChatMessage m;
        m.role = text::Role::System;
        m.content = text_content(*system, "system");
        messages.push_back(std::move(m));
    }
    const Json* list = member(json, "messages");
    if (list == nullptr) throw_bad_field("messages", "is required");
    if (!list->is_array() || list->empty()) {
        throw_bad_field("messages", "must be a non-empty array of messages");
    }
    std::set<std::string> tool_use_ids;
    for (size_t i = 0; i < list->size(); ++i) {
        add_message((*list)[i], at("messages", i), tool_use_ids, messages);
    }
    if (messages.back().role == text::Role::Assistant) {
        throw_bad_field(at("messages", list->size() - 1),
                        "a final assistant message (prefill) is not supported: the reply starts "
                        "after the chat template's generation prompt");
    }
    try {
        text::validate_conversation(messages);
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "invalid_request_error", "messages");
    }
    return messages;
}

std::vector<std::string> parse_stop_sequences(const Json& value) {
    if (!value.is_array()) throw_bad_field("stop_sequences", "must be an array of strings");
    if (value.size() > kMaxStopSequences) {
        throw_bad_field("stop_sequences",
                        "takes at most " + std::to_string(kMaxStopSequences) + " strings");
    }
    std::vector<std::string> stop;
    for (size_t i = 0; i < value.size(); ++i) {
        const std::string path = at("stop_sequences", i);
        std::string text = string_field(value[i], path);
        if (text.empty()) throw_bad_field(path, "must not be empty");
        if (text.size() > kMaxStopBytes) {
            throw_bad_field(path, "is longer than " + std::to_string(kMaxStopBytes) + " bytes");
        }
        stop.push_back(std::move(text));
    }
    return stop;
}

// The text layer names OpenAI's paths ("tools[0].function.parameters.properties"); a client of
// this endpoint wrote "tools[0].input_schema.properties".
std::string anthropic_path(std::string message) {
    for (const auto& [from, to] :
         {std::pair<std::string_view, std::string_view>{".function.parameters", ".input_schema"},
          {".function.", "."}}) {
        for (size_t pos = message.find(from); pos != std::string::npos;
             pos = message.find(from, pos + to.size())) {
            message.replace(pos, from.size(), to);
        }
    }
    return message;
}

// Anthropic's tools in OpenAI's form, which the template renders and the tool-call parser
// takes: {"type":"function","function":{name, description, parameters: input_schema}}.
Json function_tools(const Json& tools) {
    if (!tools.is_array()) throw_bad_field("tools", "must be an array of tools");
    Json out = Json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string path = at("tools", i);
        const Json& tool = tools[i];
        if (!tool.is_object()) throw_bad_field(path, "must be an object");
        if (const Json* type = member(tool, "type")) {
            const std::string name = string_field(*type, path + ".type");
            if (name != "custom") {
                throw_bad_field(path + ".type",
                                "server tools ('" + name.substr(0, 60) +
                                    "') are not supported; give client tools with name, "
                                    "description and input_schema",
                                "unsupported_parameter");
            }
        }
        check_keys(tool, path, {"type", "name", "description", "input_schema", "cache_control"});
        Json function = Json::object();
        function["name"] = required_member(tool, path, "name");
        if (const Json* v = member(tool, "description")) function["description"] = *v;
        const Json& schema = required_member(tool, path, "input_schema");
        if (!schema.is_object()) throw_bad_field(path + ".input_schema", "must be an object");
        function["parameters"] = schema;
        out.push_back(Json{{"type", "function"}, {"function", std::move(function)}});
    }
    return out;
}

text::ToolChoice parse_tool_choice(const Json& choice) {
    if (!choice.is_object()) throw_bad_field("tool_choice", "must be an object with a type");
    check_keys(choice, "tool_choice", {"type", "name", "disable_parallel_tool_use"});
    const std::string type =
        string_field(required_member(choice, "tool_choice", "type"), "tool_choice.type");
    if (const Json* v = member(choice, "disable_parallel_tool_use");
        v != nullptr && boolean_field(*v, "tool_choice.disable_parallel_tool_use")) {
        throw_bad_field("tool_choice.disable_parallel_tool_use",
                        "only false is supported (the model may write several calls in a turn)",
                        "unsupported_parameter");
    }
    if (type == "auto") return text::ToolChoice::Auto;
    if (type == "none") return text::ToolChoice::None;
    if (type == "any" || type == "tool") {
        throw_bad_field("tool_choice.type",
                        "\"" + type +
                            "\" is not supported: the checkpoint cannot be obliged to call a "
                            "tool (use \"auto\" or \"none\")",
                        "unsupported_parameter");
    }
    throw_bad_field("tool_choice.type", "must be \"auto\", \"none\", \"any\" or \"tool\", got '" +
                                            type.substr(0, 40) + "'");
}

void parse_tools(const Json& json, CompletionRequest& request) {
    if (const Json* v = member(json, "tools")) {
        const Json functions = function_tools(*v);
        try {
            request.tools.tools = text::parse_tools(functions);
        } catch (const Error& e) {
            throw ApiError(400, anthropic_path(e.what()), "invalid_request_error", "tools");
        }
        if (!functions.empty()) request.tools_json = functions;
    }
    if (const Json* v = member(json, "tool_choice")) request.tools.choice = parse_tool_choice(*v);
}

void check_fields(const Json& json) {
    static const std::set<std::string, std::less<>> kKnown = {
        "model", "messages", "system", "max_tokens",  "temperature",   "top_p",
        "top_k", "stream",   "tools",  "tool_choice", "stop_sequences"};
    for (const auto& [key, value] : json.items()) {
        if (kKnown.count(key) != 0 || kIgnored.count(key) != 0) continue;
        bool refused = false;
        for (const Refused& r : kRefused) {
            if (key != r.field) continue;
            refused = true;
            // Thinking switched off asks for what the server does anyway.
            if (key == "thinking" && value.is_object() && value.value("type", "") == "disabled") {
                break;
            }
            if (!value.is_null()) throw_bad_field(key, r.why, "unsupported_parameter");
        }
        if (refused) continue;
        throw_bad_field(key, "unknown field", "unknown_parameter");
    }
}

}  // namespace

CompletionRequest parse_messages_request(std::string_view body,
                                         const MessagesParseOptions& options) {
    const Json json = parse_body(body);
    if (!json.is_object()) throw_bad_field("", "the body must be a JSON object");
    check_fields(json);
    CompletionRequest request;
    request.endpoint = Endpoint::Chat;
    if (const Json* v = member(json, "model")) request.model = string_field(*v, "model");
    if (const Json* v = member(json, "max_tokens")) {
        request.max_tokens =
            integer_field(*v, "max_tokens", 1, std::numeric_limits<int32_t>::max());
    } else if (options.require_max_tokens) {
        throw_bad_field("max_tokens", "is required");
    }
    // Anthropic's ranges: temperature 0-1, top_p (0, 1], top_k a positive count (0: off here).
    if (const Json* v = member(json, "temperature")) {
        request.sampling.temperature = number_field(*v, "temperature", 0, 1);
    }
    if (const Json* v = member(json, "top_p")) {
        request.sampling.top_p = number_field(*v, "top_p", 0, 1, true);
    }
    if (const Json* v = member(json, "top_k")) {
        request.sampling.top_k = static_cast<int32_t>(
            integer_field(*v, "top_k", 0, std::numeric_limits<int32_t>::max()));
    }
    if (const Json* v = member(json, "stop_sequences")) request.stop = parse_stop_sequences(*v);
    if (const Json* v = member(json, "stream")) request.stream = boolean_field(*v, "stream");
    request.messages = parse_conversation(json);
    parse_tools(json, request);
    return request;
}

}  // namespace cherenkov::serving::anthropic
