// OpenAI-style message JSON -> ChatMessage, with JSON-pointer paths in every error.
#include "text/chat_message.h"

#include "base/error.h"

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;

// "<path>/<key>", the JSON pointer of a member or element.
std::string child(const std::string& path, const std::string& key) {
    std::string out = path;
    out += '/';
    out += key;
    return out;
}

std::string child(const std::string& path, size_t index) {
    return child(path, std::to_string(index));
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
    throw_invalid(path + ": " + message);
}

std::string type_word(const Json& value) {
    return value.type_name();
}

std::string require_string(const Json& value, const std::string& path) {
    if (!value.is_string()) fail(path, "must be a string, not " + type_word(value));
    return value.get<std::string>();
}

Role parse_role(const Json& value, const std::string& path) {
    std::string role = require_string(value, path);
    if (role == "system" || role == "developer") return Role::System;
    if (role == "user") return Role::User;
    if (role == "assistant") return Role::Assistant;
    if (role == "tool") return Role::Tool;
    fail(path, "unknown role '" + role + "' (expected system, developer, user, assistant or tool)");
}

std::variant<std::monostate, std::string, std::vector<ContentPart>> parse_content(
    const Json& value, const std::string& path) {
    if (value.is_null()) return std::monostate();
    if (value.is_string()) return value.get<std::string>();
    if (!value.is_array())
        fail(path, "must be a string, null or a list of content parts, not " + type_word(value));
    std::vector<ContentPart> parts;
    for (size_t index = 0; index < value.size(); ++index) {
        const Json& part = value[index];
        std::string part_path = child(path, index);
        if (!part.is_object()) fail(part_path, "must be an object, not " + type_word(part));
        auto type = part.find("type");
        if (type == part.end()) fail(part_path + "/type", "missing");
        std::string type_name = require_string(*type, part_path + "/type");
        if (type_name != "text")
            fail(part_path + "/type",
                 "unsupported content part type '" + type_name + "' (only text)");
        for (const auto& [key, item] : part.items()) {
            if (key != "type" && key != "text") fail(child(part_path, key), "unknown key");
        }
        auto text = part.find("text");
        if (text == part.end()) fail(part_path + "/text", "missing");
        parts.push_back({require_string(*text, part_path + "/text")});
    }
    return parts;
}

Json parse_arguments(const Json& value, const std::string& path) {
    Json arguments = value;
    if (value.is_string()) {
        try {
            arguments = Json::parse(value.get<std::string>());
        } catch (const Json::exception& e) {
            fail(path, std::string("not valid JSON: ") + e.what());
        }
    }
    if (!arguments.is_object())
        fail(path, "must be a JSON object (or a string holding one), not " + type_word(arguments));
    return arguments;
}

MessageToolCall parse_tool_call(const Json& value, const std::string& path) {
    if (!value.is_object()) fail(path, "must be an object, not " + type_word(value));
    MessageToolCall call;
    const Json* function = nullptr;
    for (const auto& [key, item] : value.items()) {
        if (key == "id") {
            call.id = require_string(item, path + "/id");
        } else if (key == "type") {
            if (require_string(item, path + "/type") != "function")
                fail(path + "/type", "must be \"function\"");
        } else if (key == "function") {
            function = &item;
        } else if (key != "index") {
            fail(child(path, key), "unknown key");
        }
    }
    if (function == nullptr) fail(path + "/function", "missing");
    std::string function_path = path + "/function";
    if (!function->is_object())
        fail(function_path, "must be an object, not " + type_word(*function));
    bool has_name = false;
    for (const auto& [key, item] : function->items()) {
        if (key == "name") {
            call.name = require_string(item, function_path + "/name");
            has_name = true;
        } else if (key == "arguments") {
            call.arguments = parse_arguments(item, function_path + "/arguments");
        } else {
            fail(child(function_path, key), "unknown key");
        }
    }
    if (!has_name) fail(function_path + "/name", "missing");
    return call;
}

ChatMessage parse_message(const Json& value, const std::string& path) {
    if (!value.is_object()) fail(path, "must be an object, not " + type_word(value));
    auto role = value.find("role");
    if (role == value.end()) fail(path + "/role", "missing");
    ChatMessage message;
    message.role = parse_role(*role, path + "/role");
    for (const auto& [key, item] : value.items()) {
        std::string key_path = child(path, key);
        if (key == "role" || key == "refusal" || key == "annotations" || key == "audio") continue;
        if (key == "content") {
            message.content = parse_content(item, key_path);
        } else if (key == "tool_calls") {
            if (item.is_null()) continue;
            if (!item.is_array()) fail(key_path, "must be a list, not " + type_word(item));
            if (message.role != Role::Assistant && !item.empty())
                fail(key_path, "only assistant messages carry tool calls");
            for (size_t index = 0; index < item.size(); ++index) {
                message.tool_calls.push_back(parse_tool_call(item[index], child(key_path, index)));
            }
        } else if (key == "tool_call_id" || key == "name") {
            if (item.is_null()) continue;
            (key == "name" ? message.name : message.tool_call_id) = require_string(item, key_path);
        } else if (key == "reasoning_content" || key == "reasoning" || key == "thinking") {
            if (item.is_null()) continue;
            std::string reasoning = require_string(item, key_path);
            if (message.reasoning_content && *message.reasoning_content != reasoning) {
                fail(key_path,
                     "differs from the reasoning given under another name (reasoning_content, "
                     "reasoning, thinking)");
            }
            message.reasoning_content = std::move(reasoning);
        } else {
            fail(key_path, "unknown key");
        }
    }
    return message;
}

}  // namespace

std::string_view role_name(Role role) {
    switch (role) {
        case Role::System: return "system";
        case Role::User: return "user";
        case Role::Assistant: return "assistant";
        case Role::Tool: return "tool";
    }
    return "user";
}

std::vector<ChatMessage> parse_messages(const nlohmann::ordered_json& messages) {
    if (!messages.is_array()) fail("messages", "must be a list, not " + type_word(messages));
    std::vector<ChatMessage> out;
    out.reserve(messages.size());
    for (size_t index = 0; index < messages.size(); ++index) {
        out.push_back(parse_message(messages[index], child("messages", index)));
    }
    return out;
}

void validate_conversation(const std::vector<ChatMessage>& messages) {
    bool has_user = false;
    for (size_t index = 0; index < messages.size(); ++index) {
        if (messages[index].role == Role::System && index > 0) {
            fail(child("messages", index), "a system (or developer) message may only come first");
        }
        has_user |= messages[index].role == Role::User;
    }
    if (!has_user) fail("messages", "the conversation must contain a user message");
}

}  // namespace cherenkov::text
