// A completion request's prompt as token ids: chat messages rendered through the checkpoint's
// template (seed "Chat template": add_generation_prompt on, thinking off, tools passed through),
// text completions tokenized as they are (as `cherenkov MODEL --raw`).
#pragma once

#include <cstdint>
#include <vector>

#include "serving/completion_request.h"
#include "serving/served_model.h"

namespace cherenkov::serving {

// Throws ApiError 400 naming the field when the template refuses the conversation, the prompt is
// empty, or a token id is outside the vocabulary.
std::vector<int32_t> prompt_tokens(const CompletionRequest& request, const ServedModel& served);

}  // namespace cherenkov::serving
