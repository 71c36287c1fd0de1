// Anthropic's Messages wire format as a ReplyFormat: the `message` object, the named stream
// events (message_start, ping, content_block_start/delta/stop, message_delta, message_stop),
// and errors as {"type":"error","error":{"type","message"}}. Text is block 0 when there is any;
// tool calls follow as tool_use blocks, each streamed as one input_json_delta, since the
// tool-call parser releases a call only once its markup is complete.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serving/reply_format.h"

namespace cherenkov::serving::anthropic {

struct MessagesContext {
    std::string id;     // "msg_<request id>"
    std::string model;  // echoed as sent
    int64_t prompt_tokens = 0;
};

// Anthropic's error type for an HTTP status (invalid_request_error, not_found_error,
// request_too_large, overloaded_error, api_error, ...).
std::string error_type(int status);
// {"type":"error","error":{"type","message"}}.
nlohmann::json error_json(const ApiError& error);

// end_turn, max_tokens, stop_sequence, tool_use, or cancelled (ours: the request was cancelled).
std::string stop_reason(const Frame& final);
// The response's usage: input_tokens counts the prompt tokens processed (not restored from the
// prefix cache), cache_read_input_tokens the restored ones, so their sum is the prompt.
nlohmann::json usage_json(const Usage& usage);
// A tool call's id as a tool_use block's: "toolu_" + the call's hex digits.
std::string tool_use_id(const std::string& call_id);

class MessagesReply : public ReplyFormat {
public:
    // Seconds without output after which a stream sends a ping, so proxies keep it open during a
    // long prefill.
    static constexpr std::chrono::seconds kPingInterval{10};

    explicit MessagesReply(MessagesContext context) : context_(std::move(context)) {}

    nlohmann::json error_body(const ApiError& error) const override { return error_json(error); }
    nlohmann::json response(const Frame& final) const override;
    std::string stream_open() override;
    std::string stream_delta(const OutputDelta& delta) override;
    std::string stream_close(const Frame& final) override;
    std::string stream_error(const ApiError& error) override;
    std::string stream_idle(std::chrono::steady_clock::time_point now) override;

private:
    std::string event(const char* name, const nlohmann::json& data);

    MessagesContext context_;
    int blocks_ = 0;          // content blocks started
    bool text_open_ = false;  // block 0 is text and not yet stopped
    std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

}  // namespace cherenkov::serving::anthropic
