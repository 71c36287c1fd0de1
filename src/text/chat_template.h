// The checkpoint's chat template: loaded from a model directory and rendered over typed
// messages the way transformers' apply_chat_template does (same variables, same Jinja
// semantics), after checking the conversation rules the server promises.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_message.h"
#include "text/jinja/limits.h"
#include "text/jinja/template.h"

namespace cherenkov::text {

// Special tokens tokenizer_config.json names; the template sees those that are set.
struct SpecialTokens {
    std::optional<std::string> bos_token;
    std::optional<std::string> eos_token;
    std::optional<std::string> pad_token;
    std::optional<std::string> unk_token;
};

struct RenderOptions {
    bool add_generation_prompt = true;
    bool enable_thinking = false;
    jinja::RenderLimits limits;
};

class ChatTemplate {
public:
    // Loads `dir`/chat_template.jinja, falling back to the `chat_template` of
    // `dir`/tokenizer_config.json (a string, or a list of {name, template} whose "default"
    // entry is used). Special tokens come from tokenizer_config.json when it exists.
    // Throws NotFound when there is no template, InvalidInput/Corrupt naming the file otherwise.
    static ChatTemplate load_directory(const std::string& dir);
    // `name` (usually the file) prefixes template errors.
    static ChatTemplate from_source(std::string_view source, std::string name,
                                    SpecialTokens tokens = {});

    // Validates the conversation (validate_conversation) and renders it. `tools` is a JSON
    // list of tool definitions, passed to the template unchanged; null or an empty list leaves
    // `tools` undefined. Template errors name the template, line and column; errors the
    // template raises itself (raise_exception) carry its message verbatim.
    std::string render(const std::vector<ChatMessage>& messages,
                       const nlohmann::ordered_json& tools,
                       const RenderOptions& options = {}) const;

    const std::string& name() const { return template_.name(); }
    const SpecialTokens& special_tokens() const { return tokens_; }

private:
    ChatTemplate(jinja::Template compiled, SpecialTokens tokens)
        : template_(std::move(compiled)), tokens_(std::move(tokens)) {}

    jinja::Template template_;
    SpecialTokens tokens_;
};

}  // namespace cherenkov::text
