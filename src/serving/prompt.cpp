#include "serving/prompt.h"

#include <algorithm>

#include "base/error.h"
#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

// The most tokens of `tokens` whose bytes all lie within the first `bytes` bytes of the text they
// encode (0 when a token's bytes are unknown before that).
int64_t tokens_within(const text::Tokenizer& tokenizer, const std::vector<int32_t>& tokens,
                      size_t bytes) {
    size_t at = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const auto piece = tokenizer.token_bytes(tokens[t]);
        if (!piece || at + piece->size() > bytes) return static_cast<int64_t>(t);
        at += piece->size();
    }
    return static_cast<int64_t>(tokens.size());
}

size_t common_prefix(const std::string& a, const std::string& b) {
    const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<size_t>(ia - a.begin());
}

// Token counts where the system message and the last message end in `rendered` (the prompt with
// its generation prompt), found by rendering the conversation without the generation prompt
// and the system message with a placeholder query. Boundaries the template makes impossible
// (it refuses the partial conversation, or renders it differently) are left out.
std::vector<int64_t> message_boundaries(const std::vector<text::ChatMessage>& messages,
                                        const nlohmann::ordered_json& tools,
                                        const std::string& rendered,
                                        const std::vector<int32_t>& tokens,
                                        const ServedModel& served) {
    std::vector<std::string> prefixes;
    text::RenderOptions render;
    render.add_generation_prompt = false;
    render.enable_thinking = false;
    try {
        prefixes.push_back(served.chat_template->render(messages, tools, render));
        if (messages.size() > 1 && messages.front().role == text::Role::System) {
            text::ChatMessage placeholder;
            placeholder.role = text::Role::User;
            placeholder.content = std::string("\x1f");
            prefixes.push_back(
                served.chat_template->render({messages.front(), placeholder}, tools, render));
        }
    } catch (const Error&) {
        // A template may refuse a conversation that does not end with a query: no boundary.
    }
    std::vector<int64_t> out;
    const auto n = static_cast<int64_t>(tokens.size());
    for (const std::string& prefix : prefixes) {
        const int64_t t = tokens_within(served.tokenizer, tokens, common_prefix(prefix, rendered));
        if (t > 0 && t < n) out.push_back(t);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace

PromptTokens prompt_tokens(const CompletionRequest& request,
                           const std::vector<text::ChatMessage>& messages,
                           const ServedModel& served) {
    PromptTokens prompt;
    std::vector<int32_t>& tokens = prompt.tokens;
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
                served.chat_template->render(messages, request.tools_json, render);
            tokens = served.tokenizer.encode(rendered, true);
            prompt.boundaries =
                message_boundaries(messages, request.tools_json, rendered, tokens, served);
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
    return prompt;
}

}  // namespace cherenkov::serving
