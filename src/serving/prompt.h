// A completion request's prompt as token ids: chat messages rendered through the checkpoint's
// template (seed "Chat template": add_generation_prompt on, thinking off, tools passed through),
// text completions tokenized as they are (as `cherenkov MODEL --raw`). For chat it also finds
// the message boundaries worth a prefix checkpoint (seed "Prefix cache"; "Source map": cache
// boundaries must match prefixes of the complete rendered prompt): where the system message
// ends, and where the last message ends before the generation prompt, which is where the next
// turn of the same conversation diverges from this one.
#pragma once

#include <cstdint>
#include <vector>

#include "serving/completion_request.h"
#include "serving/served_model.h"

namespace cherenkov::serving {

struct PromptTokens {
    std::vector<int32_t> tokens;
    // Token counts at message boundaries, ascending, each in (0, tokens.size()).
    std::vector<int64_t> boundaries;
};

// `messages` is the conversation to render for chat (a session's history followed by the turn's
// new messages, or the request's messages); unused for text completions. Throws ApiError 400
// naming the field when the template refuses the conversation, the prompt is empty, or a token
// id is outside the vocabulary.
PromptTokens prompt_tokens(const CompletionRequest& request,
                           const std::vector<text::ChatMessage>& messages,
                           const ServedModel& served);

}  // namespace cherenkov::serving
