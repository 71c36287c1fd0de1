// Loading (chat_template.jinja or tokenizer_config.json) and rendering with the variables
// transformers supplies: messages, tools, add_generation_prompt, enable_thinking and the
// tokenizer's special tokens.
#include "text/chat_template.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "text/jinja/json_value.h"

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;
using jinja::Dict;
using jinja::Value;

// A special token as tokenizer_config.json spells it: a string, or an AddedToken object.
std::optional<std::string> token_text(const Json& config, const char* key) {
    auto found = config.find(key);
    if (found == config.end() || found->is_null()) return std::nullopt;
    if (found->is_string()) return found->get<std::string>();
    if (found->is_object()) {
        auto content = found->find("content");
        if (content != found->end() && content->is_string()) return content->get<std::string>();
    }
    return std::nullopt;
}

std::string template_from_config(const Json& config, const std::string& path) {
    auto found = config.find("chat_template");
    if (found == config.end() || found->is_null()) throw_not_found(path + ": no chat_template");
    if (found->is_string()) return found->get<std::string>();
    if (!found->is_array())
        throw_corrupt(path + ": chat_template must be a string or a list of named templates");
    for (const auto& entry : *found) {
        if (!entry.is_object()) continue;
        auto name = entry.find("name");
        auto text = entry.find("template");
        if (name != entry.end() && *name == "default" && text != entry.end() && text->is_string()) {
            return text->get<std::string>();
        }
    }
    throw_not_found(path + ": chat_template lists no template named \"default\"");
}

Value content_value(const ChatMessage& message) {
    if (const auto* text = std::get_if<std::string>(&message.content)) return Value::string(*text);
    jinja::ValueList parts;
    for (const auto& part : std::get<std::vector<ContentPart>>(message.content)) {
        Dict item;
        item.set(Value::string("type"), Value::string("text"));
        item.set(Value::string("text"), Value::string(part.text));
        parts.push_back(Value::dict(std::move(item)));
    }
    return Value::list(std::move(parts));
}

Value tool_call_value(const MessageToolCall& call) {
    Dict function;
    function.set(Value::string("name"), Value::string(call.name));
    function.set(Value::string("arguments"), jinja::value_from_json(call.arguments));
    Dict item;
    if (!call.id.empty()) item.set(Value::string("id"), Value::string(call.id));
    item.set(Value::string("type"), Value::string("function"));
    item.set(Value::string("function"), Value::dict(std::move(function)));
    return Value::dict(std::move(item));
}

// The dict a template sees for one message. Absent and null fields are both left out, as
// apply_chat_template drops None values; reasoning also appears as `thinking`, as
// transformers aliases it.
Value message_value(const ChatMessage& message) {
    Dict out;
    if (message.reasoning_content)
        out.set(Value::string("thinking"), Value::string(*message.reasoning_content));
    out.set(Value::string("role"), Value::string(std::string(role_name(message.role))));
    if (!std::holds_alternative<std::monostate>(message.content)) {
        out.set(Value::string("content"), content_value(message));
    }
    if (!message.tool_calls.empty()) {
        jinja::ValueList calls;
        for (const auto& call : message.tool_calls) calls.push_back(tool_call_value(call));
        out.set(Value::string("tool_calls"), Value::list(std::move(calls)));
    }
    if (message.tool_call_id)
        out.set(Value::string("tool_call_id"), Value::string(*message.tool_call_id));
    if (message.name) out.set(Value::string("name"), Value::string(*message.name));
    if (message.reasoning_content) {
        out.set(Value::string("reasoning_content"), Value::string(*message.reasoning_content));
    }
    return Value::dict(std::move(out));
}

void set_token(Dict& context, const char* key, const std::optional<std::string>& token) {
    if (token) context.set(Value::string(key), Value::string(*token));
}

}  // namespace

ChatTemplate ChatTemplate::load_directory(const std::string& dir) {
    std::filesystem::path root(dir);
    std::filesystem::path config_path = root / "tokenizer_config.json";
    std::filesystem::path template_path = root / "chat_template.jinja";
    Json config = Json::object();
    if (std::filesystem::exists(config_path)) {
        try {
            config = Json::parse(read_text_file(config_path.string()));
        } catch (const Json::exception& e) {
            throw_corrupt(config_path.string() + ": not valid JSON: " + e.what());
        }
        if (!config.is_object()) throw_corrupt(config_path.string() + ": must hold a JSON object");
    }
    SpecialTokens tokens{token_text(config, "bos_token"), token_text(config, "eos_token"),
                         token_text(config, "pad_token"), token_text(config, "unk_token")};
    if (std::filesystem::exists(template_path)) {
        return from_source(read_text_file(template_path.string()), template_path.string(),
                           std::move(tokens));
    }
    if (!std::filesystem::exists(config_path)) {
        throw_not_found(dir + ": no chat_template.jinja or tokenizer_config.json");
    }
    std::string source = template_from_config(config, config_path.string());
    return from_source(source, config_path.string() + ":chat_template", std::move(tokens));
}

ChatTemplate ChatTemplate::from_source(std::string_view source, std::string name,
                                       SpecialTokens tokens) {
    return ChatTemplate(jinja::Template::parse(source, std::move(name)), std::move(tokens));
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const nlohmann::ordered_json& tools,
                                 const RenderOptions& options) const {
    validate_conversation(messages);
    if (!tools.is_null() && !tools.is_array())
        throw_invalid("tools: must be a list, not " + std::string(tools.type_name()));
    jinja::ValueList message_values;
    message_values.reserve(messages.size());
    for (size_t index = 0; index < messages.size(); ++index) {
        try {
            message_values.push_back(message_value(messages[index]));
        } catch (const Error& e) {
            throw e.with_context("messages/" + std::to_string(index));
        }
    }
    Dict context;
    context.set(Value::string("messages"), Value::list(std::move(message_values)));
    if (tools.is_array() && !tools.empty()) {
        try {
            context.set(Value::string("tools"), jinja::value_from_json(tools));
        } catch (const Error& e) {
            throw e.with_context("tools");
        }
    }
    context.set(Value::string("add_generation_prompt"),
                Value::boolean(options.add_generation_prompt));
    context.set(Value::string("enable_thinking"), Value::boolean(options.enable_thinking));
    set_token(context, "bos_token", tokens_.bos_token);
    set_token(context, "eos_token", tokens_.eos_token);
    set_token(context, "pad_token", tokens_.pad_token);
    set_token(context, "unk_token", tokens_.unk_token);
    return template_.render(context, options.limits);
}

}  // namespace cherenkov::text
