// The body of POST /v1/chat/completions and POST /v1/completions, parsed and validated (OpenAI's
// wire format; the seed's "HTTP server", "Generation options" and "Tool calling"). Every field a
// client may send is either honoured, accepted and ignored (user, metadata, store: they change
// nothing here), or refused with a 400 naming it (docs/serving.md has the table).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generate/sampler.h"
#include "serving/config/generation_defaults.h"
#include "serving/json_fields.h"
#include "text/chat_message.h"
#include "text/tool_calls/tool_spec.h"

namespace cherenkov::serving {

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
    Endpoint endpoint = Endpoint::Chat;
    std::string request_id;  // empty: the server assigns one
    std::string model;       // as sent (any value is accepted: one model is served)
    // Chat only: the session whose conversation this turn continues (messages are then only the
    // new ones); empty without a session.
    std::string session_id;

    // Chat: typed messages, the tools as sent (what the template renders) and their validation.
    std::vector<text::ChatMessage> messages;
    nlohmann::ordered_json tools_json;  // null when absent
    text::ToolRequest tools;

    // Completion: the prompt as text, or as token ids.
    std::string prompt;
    std::optional<std::vector<int32_t>> prompt_tokens;

    std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens
    SamplingFields sampling;
    std::vector<std::string> stop;  // at most 4, none empty

    // Log-probabilities of the chosen tokens (chat: logprobs; completion: logprobs present),
    // and how many alternatives per token (chat: top_logprobs; completion: the logprobs value).
    bool logprobs = false;
    int top_logprobs = 0;

    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage

    // The server's defaults ([defaults], [defaults.sampling]) as they were when the request
    // arrived: omitted fields take them (a session turn's sampling fields take the session's
    // committed settings instead), and a reload while the request runs does not change them.
    config::GenerationDefaults defaults;
};

// The longest stop string and most stop strings a request may give.
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopBytes = 256;
// top_logprobs range (OpenAI: 0-20).
inline constexpr int kMaxTopLogprobs = 20;

// Parses `body` (the raw request bytes) for `endpoint`, with `defaults` the snapshot of the
// server's defaults taken when the request arrived. Throws ApiError (400) naming the field for
// malformed JSON, wrong types, out-of-range values, and controls the engine cannot honour.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint,
                                           const config::GenerationDefaults& defaults = {});

// Whether `id` is a valid client request id: 1-80 of [A-Za-z0-9_-].
bool valid_request_id(std::string_view id);

}  // namespace cherenkov::serving
