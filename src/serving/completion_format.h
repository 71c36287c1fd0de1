// The JSON the completion endpoints answer with, in OpenAI's wire format: whole responses
// (chat.completion, text_completion) and stream chunks (chat.completion.chunk), each field
// where the official clients look for it. `timings` is ours (as llama.cpp's server adds one):
// prefill and decode seconds and MTP acceptance of the request.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serving/completion_request.h"
#include "serving/request_channel.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::serving {

struct ResponseContext {
    Endpoint endpoint = Endpoint::Chat;
    std::string id;  // "chatcmpl-<request id>" or "cmpl-<request id>"
    std::string model;
    int64_t created = 0;  // Unix seconds
    const text::Tokenizer* tokenizer = nullptr;
    bool logprobs = false;
    bool include_usage = false;
};

// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& payload);

// The chunk that opens a chat stream (the assistant role, empty content).
nlohmann::json opening_chunk(const ResponseContext& context);
// A chunk with new content (and its tokens' log-probabilities).
nlohmann::json delta_chunk(const ResponseContext& context, const OutputDelta& delta);
// The chunks that end a stream: the tool calls (one indexed delta), the finish reason with the
// final content delta, and the usage chunk when asked for.
std::vector<nlohmann::json> closing_chunks(const ResponseContext& context, const Frame& final);
// The whole response of a request without `stream`.
nlohmann::json full_response(const ResponseContext& context, const Frame& final);

nlohmann::json usage_json(const Usage& usage);

}  // namespace cherenkov::serving
