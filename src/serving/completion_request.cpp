#include "serving/completion_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <span>

#include "base/error.h"
#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

using Json = BodyJson;

// Fields every client library sends or may send that change nothing for one local model.
const std::set<std::string, std::less<>> kIgnored = {"user", "metadata", "store"};

// Controls the engine cannot honour, with the reason given to the client.
struct Refused {
    const char* field;
    const char* why;
};
constexpr Refused kRefusedChat[] = {
    {"response_format", "structured output (JSON mode, JSON schema) is not supported"},
    {"reasoning_effort",
     "reasoning-effort controls are not supported: chat renders the "
     "template with thinking disabled"},
    {"audio", "audio output is not supported"},
    {"modalities", "only text output is supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"logit_bias", "logit_bias is not supported"},
    {"functions", "the deprecated functions field is not supported; use tools"},
    {"function_call", "the deprecated function_call field is not supported; use tool_choice"},
    {"chat_template", "template controls are not supported: the checkpoint's template is used"},
    {"chat_template_kwargs",
     "template controls are not supported: the checkpoint's template is used"},
    {"add_generation_prompt", "template controls are not supported"},
    {"continue_final_message", "template controls are not supported"},
    {"documents", "documents are not supported"},
    {"service_tier", "service tiers are not supported"},
};
constexpr Refused kRefusedCompletion[] = {
    {"logit_bias", "logit_bias is not supported"},
    {"suffix", "suffix (insertion) is not supported"},
    {"session_id", "sessions apply to chat completions only"},
};

// Text-layer errors name their JSON path first ("messages/2/role: ..." or "tools[1].name: ...");
// the API error keeps the message and names the top-level field as the param.
[[noreturn]] void rethrow_text_error(const Error& e, const std::string& field) {
    throw ApiError(400, e.what(), "invalid_request_error", field);
}

std::vector<std::string> parse_stop(const Json& value) {
    std::vector<std::string> stop;
    const auto add = [&](const Json& s, const std::string& param) {
        std::string text = string_field(s, param);
        if (text.empty()) throw_bad_field(param, "must not be empty");
        if (text.size() > kMaxStopBytes) {
            throw_bad_field(param, "is longer than " + std::to_string(kMaxStopBytes) + " bytes");
        }
        stop.push_back(std::move(text));
    };
    if (value.is_string()) {
        add(value, "stop");
        return stop;
    }
    if (!value.is_array()) throw_bad_field("stop", "must be a string or an array of strings");
    if (value.size() > kMaxStopStrings) {
        throw_bad_field("stop", "takes at most " + std::to_string(kMaxStopStrings) + " strings");
    }
    for (size_t i = 0; i < value.size(); ++i) add(value[i], "stop[" + std::to_string(i) + "]");
    return stop;
}

void parse_prompt(const Json& value, CompletionRequest& request) {
    const auto token_list = [&](const Json& list, const std::string& param) {
        std::vector<int32_t> ids;
        for (size_t i = 0; i < list.size(); ++i) {
            ids.push_back(
                static_cast<int32_t>(integer_field(list[i], param + "[" + std::to_string(i) + "]",
                                                   0, std::numeric_limits<int32_t>::max())));
        }
        if (ids.empty()) throw_bad_field(param, "must not be empty");
        return ids;
    };
    if (value.is_string()) {
        request.prompt = value.get<std::string>();
        return;
    }
    if (!value.is_array() || value.empty()) {
        throw_bad_field("prompt",
                        "must be a string, an array of token ids, or an array of one "
                        "of those");
    }
    if (value[0].is_number()) {
        request.prompt_tokens = token_list(value, "prompt");
        return;
    }
    if (value.size() > 1) {
        throw_bad_field("prompt",
                        "several prompts in one request are not supported (n must be "
                        "1); send one request per prompt");
    }
    if (value[0].is_string()) {
        request.prompt = value[0].get<std::string>();
    } else if (value[0].is_array()) {
        request.prompt_tokens = token_list(value[0], "prompt[0]");
    } else {
        throw_bad_field("prompt[0]", "must be a string or an array of token ids");
    }
}

}  // namespace

bool valid_request_id(std::string_view id) {
    if (id.empty() || id.size() > 80) return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    });
}

CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint,
                                           const config::GenerationDefaults& defaults) {
    const Json json = parse_body(body);
    if (!json.is_object()) throw_bad_field("", "the body must be a JSON object");
    const bool chat = endpoint == Endpoint::Chat;
    CompletionRequest request;
    request.endpoint = endpoint;
    request.defaults = defaults;

    static const std::set<std::string, std::less<>> kCommon = {"model",
                                                               "max_tokens",
                                                               "temperature",
                                                               "top_p",
                                                               "top_k",
                                                               "presence_penalty",
                                                               "frequency_penalty",
                                                               "repetition_penalty",
                                                               "seed",
                                                               "stop",
                                                               "stream",
                                                               "stream_options",
                                                               "logprobs",
                                                               "n",
                                                               "request_id"};
    static const std::set<std::string, std::less<>> kChat = {
        "messages",    "max_completion_tokens", "top_logprobs", "tools",
        "tool_choice", "parallel_tool_calls",   "session_id"};
    static const std::set<std::string, std::less<>> kCompletion = {"prompt", "echo", "best_of"};
    for (const auto& [key, value] : json.items()) {
        if (kCommon.count(key) != 0 || kIgnored.count(key) != 0) continue;
        if ((chat ? kChat : kCompletion).count(key) != 0) continue;
        bool refused = false;
        for (const Refused& r : chat ? std::span<const Refused>(kRefusedChat)
                                     : std::span<const Refused>(kRefusedCompletion)) {
            if (key != r.field) continue;
            refused = true;
            // {"type": "text"} asks for what the server does anyway.
            if (key == "response_format" && value.is_object() && value.size() == 1 &&
                value.value("type", "") == "text") {
                break;
            }
            if (!value.is_null()) throw_bad_field(key, r.why, "unsupported_parameter");
        }
        if (refused) continue;
        if (chat && key == "prompt") throw_bad_field(key, "chat completions take messages");
        if (!chat && key == "messages") {
            throw_bad_field(key,
                            "text completions take a prompt; use /v1/chat/completions for "
                            "messages");
        }
        throw_bad_field(key, "unknown field", "unknown_parameter");
    }

    if (const Json* v = member(json, "model")) request.model = string_field(*v, "model");
    if (const Json* v = member(json, "request_id")) {
        request.request_id = string_field(*v, "request_id");
        if (!valid_request_id(request.request_id)) {
            throw_bad_field("request_id", "must be 1-80 ASCII letters, digits, '-' or '_'");
        }
    }
    if (const Json* v = member(json, "n"); v != nullptr && integer_field(*v, "n", 1, 128) != 1) {
        throw_bad_field("n", "only n = 1 is supported");
    }

    const Json* max_tokens = member(json, "max_tokens");
    if (chat && max_tokens == nullptr) max_tokens = member(json, "max_completion_tokens");
    if (max_tokens != nullptr) {
        const std::string name =
            member(json, "max_tokens") != nullptr ? "max_tokens" : "max_completion_tokens";
        request.max_tokens =
            integer_field(*max_tokens, name, 1, std::numeric_limits<int32_t>::max());
    }

    request.sampling = parse_sampling_fields(json);
    if (const Json* v = member(json, "stop")) request.stop = parse_stop(*v);

    if (const Json* v = member(json, "stream")) request.stream = boolean_field(*v, "stream");
    if (const Json* v = member(json, "stream_options")) {
        if (!request.stream) {
            throw_bad_field("stream_options", "is only allowed when stream is true");
        }
        if (!v->is_object()) throw_bad_field("stream_options", "must be an object");
        for (const auto& [key, option] : v->items()) {
            if (key != "include_usage") throw_bad_field("stream_options." + key, "unknown field");
            if (!option.is_null()) {
                request.include_usage = boolean_field(option, "stream_options.include_usage");
            }
        }
    }

    if (chat) {
        if (const Json* v = member(json, "logprobs"))
            request.logprobs = boolean_field(*v, "logprobs");
        if (const Json* v = member(json, "top_logprobs")) {
            request.top_logprobs =
                static_cast<int>(integer_field(*v, "top_logprobs", 0, kMaxTopLogprobs));
            if (!request.logprobs) {
                throw_bad_field("top_logprobs", "needs logprobs set to true");
            }
        }
        const Json* messages = member(json, "messages");
        if (messages == nullptr) throw_bad_field("messages", "is required");
        if (!messages->is_array() || messages->empty()) {
            throw_bad_field("messages", "must be a non-empty array of messages");
        }
        if (const Json* v = member(json, "session_id")) {
            request.session_id = string_field(*v, "session_id");
            if (request.session_id.empty()) throw_bad_field("session_id", "must not be empty");
        }
        try {
            request.messages = text::parse_messages(*messages);
            // A session turn's new messages continue a conversation: they are checked together
            // with the session's history when the prompt is rendered.
            if (request.session_id.empty()) text::validate_conversation(request.messages);
        } catch (const Error& e) {
            rethrow_text_error(e, "messages");
        }
        try {
            request.tools = text::parse_tool_request(json);
        } catch (const Error& e) {
            rethrow_text_error(e, "tools");
        }
        if (const Json* v = member(json, "tools"); v != nullptr && !request.tools.tools.empty()) {
            request.tools_json = *v;
        }
    } else {
        if (const Json* v = member(json, "logprobs")) {
            // The legacy API's logprobs is the number of alternatives (0 = the chosen token's).
            request.logprobs = true;
            request.top_logprobs =
                static_cast<int>(integer_field(*v, "logprobs", 0, kMaxTopLogprobs));
        }
        const Json* prompt = member(json, "prompt");
        if (prompt == nullptr) throw_bad_field("prompt", "is required");
        parse_prompt(*prompt, request);
        if (const Json* v = member(json, "echo"); v != nullptr && boolean_field(*v, "echo")) {
            throw_bad_field("echo", "echoing the prompt is not supported", "unsupported_parameter");
        }
        if (const Json* v = member(json, "best_of");
            v != nullptr && integer_field(*v, "best_of", 1, 128) != 1) {
            throw_bad_field("best_of", "only best_of = 1 is supported", "unsupported_parameter");
        }
    }
    return request;
}

}  // namespace cherenkov::serving
