#include "serving/completion_reply.h"

namespace cherenkov::serving {

nlohmann::json CompletionReply::response(const Frame& final) const {
    return full_response(context_, final);
}

std::string CompletionReply::stream_open() {
    // Chat streams open with the assistant's role; text completions start with their text.
    return context_.endpoint == Endpoint::Chat ? sse_event(opening_chunk(context_)) : std::string();
}

std::string CompletionReply::stream_delta(const OutputDelta& delta) {
    return sse_event(delta_chunk(context_, delta));
}

std::string CompletionReply::stream_close(const Frame& final) {
    std::string out;
    for (const nlohmann::json& chunk : closing_chunks(context_, final)) out += sse_event(chunk);
    return out + "data: [DONE]\n\n";
}

std::string CompletionReply::stream_error(const ApiError& error) {
    return sse_event(error.body()) + "data: [DONE]\n\n";
}

}  // namespace cherenkov::serving
