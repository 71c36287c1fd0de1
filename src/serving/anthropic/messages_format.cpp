#include "serving/anthropic/messages_format.h"

#include "text/tool_calls/tool_call.h"

namespace cherenkov::serving::anthropic {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& value) {
    return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json tool_use_block(const text::ToolCall& call, bool with_input) {
    Json input = Json::object();
    if (with_input && call.argument_values.is_object()) {
        input =
            Json::parse(call.argument_values.dump(-1, ' ', false, Json::error_handler_t::replace));
    }
    return {{"type", "tool_use"},
            {"id", tool_use_id(call.id)},
            {"name", call.name},
            {"input", std::move(input)}};
}

}  // namespace

std::string error_type(int status) {
    switch (status) {
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 413: return "request_too_large";
        case 429: return "rate_limit_error";
        case 503: return "overloaded_error";
        default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

Json error_json(const ApiError& error) {
    Json detail = Json::object();
    detail["type"] = error_type(error.status());
    detail["message"] = error.what();
    return {{"type", "error"}, {"error", std::move(detail)}};
}

std::string stop_reason(const Frame& final) {
    if (final.finish_reason == "length") return "max_tokens";
    if (final.finish_reason == "tool_calls") return "tool_use";
    if (final.finish_reason == "cancelled") return "cancelled";
    return final.stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

Json usage_json(const Usage& usage) {
    return {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", usage.cached_tokens},
            {"output_tokens", usage.completion_tokens}};
}

std::string tool_use_id(const std::string& call_id) {
    constexpr std::string_view kCall = "call_";
    if (call_id.rfind(kCall, 0) == 0) return "toolu_" + call_id.substr(kCall.size());
    return call_id;
}

Json MessagesReply::response(const Frame& final) const {
    Json content = Json::array();
    if (!final.content.empty()) content.push_back({{"type", "text"}, {"text", final.content}});
    for (const text::ToolCall& call : final.calls) content.push_back(tool_use_block(call, true));
    const std::string reason = stop_reason(final);
    return {{"id", context_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", context_.model},
            {"content", std::move(content)},
            {"stop_reason", reason},
            {"stop_sequence", reason == "stop_sequence" ? Json(final.stop_sequence) : Json()},
            {"usage", usage_json(final.usage)}};
}

std::string MessagesReply::event(const char* name, const Json& data) {
    last_write_ = std::chrono::steady_clock::now();
    return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

std::string MessagesReply::stream_open() {
    // The prompt's split into processed and cached tokens is known at the end: message_delta
    // carries the final usage.
    Json message = {{"id", context_.id},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", context_.model},
                    {"content", Json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage",
                     {{"input_tokens", context_.prompt_tokens},
                      {"cache_creation_input_tokens", 0},
                      {"cache_read_input_tokens", 0},
                      {"output_tokens", 0}}}};
    return event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
           event("ping", {{"type", "ping"}});
}

std::string MessagesReply::stream_delta(const OutputDelta& delta) {
    if (delta.content.empty()) return {};
    std::string out;
    if (!text_open_) {
        text_open_ = true;
        out += event("content_block_start", {{"type", "content_block_start"},
                                             {"index", blocks_},
                                             {"content_block", {{"type", "text"}, {"text", ""}}}});
        ++blocks_;
    }
    out += event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", blocks_ - 1},
                  {"delta", {{"type", "text_delta"}, {"text", delta.content}}}});
    return out;
}

std::string MessagesReply::stream_close(const Frame& final) {
    std::string out = stream_delta(final.delta);
    if (text_open_) {
        text_open_ = false;
        out +=
            event("content_block_stop", {{"type", "content_block_stop"}, {"index", blocks_ - 1}});
    }
    for (const text::ToolCall& call : final.calls) {
        const int index = blocks_++;
        out += event("content_block_start", {{"type", "content_block_start"},
                                             {"index", index},
                                             {"content_block", tool_use_block(call, false)}});
        out += event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", index},
                      {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
        out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    }
    const std::string reason = stop_reason(final);
    out += event(
        "message_delta",
        {{"type", "message_delta"},
         {"delta",
          {{"stop_reason", reason},
           {"stop_sequence", reason == "stop_sequence" ? Json(final.stop_sequence) : Json()}}},
         {"usage", usage_json(final.usage)}});
    return out + event("message_stop", {{"type", "message_stop"}});
}

std::string MessagesReply::stream_error(const ApiError& error) {
    return event("error", error_json(error));
}

std::string MessagesReply::stream_idle(std::chrono::steady_clock::time_point now) {
    if (now - last_write_ < kPingInterval) return {};
    return event("ping", {{"type", "ping"}});
}

}  // namespace cherenkov::serving::anthropic
