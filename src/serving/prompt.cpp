#include "serving/prompt.h"

#include "base/error.h"
#include "serving/api_error.h"

namespace cherenkov::serving {

std::vector<int32_t> prompt_tokens(const CompletionRequest& request, const ServedModel& served) {
    std::vector<int32_t> tokens;
    try {
        if (request.endpoint == Endpoint::Chat) {
            if (!served.chat_template) {
                throw ApiError(400,
                               "the model has no chat template (chat_template.jinja or "
                               "tokenizer_config.json); use /v1/completions",
                               "invalid_request_error", "messages");
            }
            text::RenderOptions render;
            render.add_generation_prompt = true;
            render.enable_thinking = false;
            const std::string rendered =
                served.chat_template->render(request.messages, request.tools_json, render);
            tokens = served.tokenizer.encode(rendered, true);
        } else if (request.prompt_tokens) {
            tokens = *request.prompt_tokens;
            const int64_t vocab = served.model->vocab_size();
            for (size_t i = 0; i < tokens.size(); ++i) {
                if (tokens[i] >= vocab) {
                    throw_bad_field("prompt[" + std::to_string(i) + "]",
                                    "token id " + std::to_string(tokens[i]) +
                                        " is outside the vocabulary of " + std::to_string(vocab));
                }
            }
        } else {
            tokens = served.tokenizer.encode(request.prompt, true);
        }
    } catch (const Error& e) {
        // Template errors (raise_exception) and text the tokenizer refuses are the client's.
        throw ApiError(400, e.what(), "invalid_request_error",
                       request.endpoint == Endpoint::Chat ? "messages" : "prompt");
    }
    if (tokens.empty()) {
        throw_bad_field(request.endpoint == Endpoint::Chat ? "messages" : "prompt",
                        "the prompt encodes to no tokens");
    }
    return tokens;
}

}  // namespace cherenkov::serving
