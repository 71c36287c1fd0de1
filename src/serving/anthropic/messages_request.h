// The body of POST /v1/messages (Anthropic's Messages API) parsed into the same typed request the
// OpenAI chat endpoint makes, so both run through one prompt, tool-call and generation path:
// `system` becomes the system message, a message's text blocks become its text (joined), `tool_use`
// blocks become an assistant message's tool calls and `tool_result` blocks become tool messages,
// and `tools` become function tools. Every field is honoured, accepted and ignored, or refused with
// a 400 naming it (docs/serving.md, "Anthropic Messages API", has the table).
#pragma once

#include <string_view>

#include "serving/completion_request.h"

namespace cherenkov::serving::anthropic {

// Anthropic sets no limit on stop_sequences; ours bounds the per-token matching work.
inline constexpr size_t kMaxStopSequences = 16;

struct MessagesParseOptions {
    // POST /v1/messages requires max_tokens (as Anthropic does); count_tokens takes none.
    bool require_max_tokens = true;
};

// Parses `body`. The result is a chat request (Endpoint::Chat) whose `stop` holds the stop
// sequences. Throws ApiError (400) naming the field, as a JSON path ("messages[1].content[0]"),
// for malformed JSON, wrong types and ranges, and anything the server cannot honour.
CompletionRequest parse_messages_request(std::string_view body,
                                         const MessagesParseOptions& options = {});

}  // namespace cherenkov::serving::anthropic
