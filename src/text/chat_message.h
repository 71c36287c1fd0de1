// Chat messages as the renderer takes them: typed, validated structs parsed from the
// OpenAI-style JSON a client sends (roles system, developer, user, assistant, tool).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cherenkov::text {

// One element of list-form content; only text parts are accepted.
struct ContentPart {
    std::string text;
};

struct MessageToolCall {
    std::string id;  // empty when the client gave none
    std::string name;
    // Always a JSON object: a JSON string given by the client is decoded here, as templates
    // expect a mapping (they iterate it or print it with tojson).
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

enum class Role { System, User, Assistant, Tool };

struct ChatMessage {
    Role role = Role::User;
    // null (or absent), a string, or a list of text parts.
    std::variant<std::monostate, std::string, std::vector<ContentPart>> content;
    std::vector<MessageToolCall> tool_calls;  // assistant only
    std::optional<std::string> tool_call_id;
    std::optional<std::string> name;
    std::optional<std::string> reasoning_content;
};

std::string_view role_name(Role role);

// Parses a JSON array of messages. Errors are InvalidInput naming the JSON path, e.g.
// "messages/2/role: unknown role 'bot'". The developer role becomes system. Keys other than
// role, content, tool_calls, tool_call_id, name, reasoning_content (or its aliases reasoning
// and thinking) are rejected, except refusal, annotations and audio, which are ignored.
std::vector<ChatMessage> parse_messages(const nlohmann::ordered_json& messages);

// The conversation rules the renderer enforces before any template runs: a system message
// only at the start, at least one user message. Throws InvalidInput naming the message.
void validate_conversation(const std::vector<ChatMessage>& messages);

}  // namespace cherenkov::text
