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

using Json = nlohmann::ordered_json;

// Deeper bodies are refused before anything walks them recursively (the chat template's
// tojson, schema checks). Real requests nest tool schemas a few levels deep.
constexpr int kMaxDepth = 64;

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
    {"session_id", "sessions are not supported by this server yet"},
};
constexpr Refused kRefusedCompletion[] = {
    {"logit_bias", "logit_bias is not supported"},
    {"suffix", "suffix (insertion) is not supported"},
    {"session_id", "sessions apply to chat completions only"},
};

const Json* member(const Json& body, std::string_view key) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

bool boolean(const Json& value, const std::string& param) {
    if (!value.is_boolean()) throw_bad_field(param, "must be a boolean");
    return value.get<bool>();
}

int64_t integer(const Json& value, const std::string& param, int64_t lo, int64_t hi) {
    // 3.0 is an integer to JSON Schema and to Python clients that compute a value.
    int64_t v = 0;
    if (value.is_number_integer()) {
        if (value.is_number_unsigned() &&
            value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            throw_bad_field(param, "must be at most " + std::to_string(hi));
        }
        v = value.get<int64_t>();
    } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
               std::floor(value.get<double>()) == value.get<double>() &&
               std::fabs(value.get<double>()) < 9.0e15) {
        v = static_cast<int64_t>(value.get<double>());
    } else {
        throw_bad_field(param, "must be an integer");
    }
    if (v < lo || v > hi) {
        throw_bad_field(param, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + std::to_string(v));
    }
    return v;
}

std::string format_number(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

// A number in [lo, hi] (lo excluded when `open_lo`).
float number(const Json& value, const std::string& param, double lo, double hi,
             bool open_lo = false) {
    if (!value.is_number()) throw_bad_field(param, "must be a number");
    const double v = value.get<double>();
    const bool low_ok = open_lo ? v > lo : v >= lo;
    if (!std::isfinite(v) || !low_ok || v > hi) {
        throw_bad_field(param, std::string("must be in ") + (open_lo ? "(" : "[") +
                                   format_number(lo) + ", " + format_number(hi) + "], got " +
                                   format_number(v));
    }
    return static_cast<float>(v);
}

std::string string(const Json& value, const std::string& param) {
    if (!value.is_string()) throw_bad_field(param, "must be a string");
    return value.get<std::string>();
}

// Text-layer errors name their JSON path first ("messages/2/role: ..." or "tools[1].name: ...");
// the API error keeps the message and names the top-level field as the param.
[[noreturn]] void rethrow_text_error(const Error& e, const std::string& field) {
    throw ApiError(400, e.what(), "invalid_request_error", field);
}

std::vector<std::string> parse_stop(const Json& value) {
    std::vector<std::string> stop;
    const auto add = [&](const Json& s, const std::string& param) {
        std::string text = string(s, param);
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
                static_cast<int32_t>(integer(list[i], param + "[" + std::to_string(i) + "]", 0,
                                             std::numeric_limits<int32_t>::max())));
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

Json parse_json(std::string_view body) {
    if (body.empty()) throw_bad_field("", "the request has no body; send a JSON object");
    try {
        Json::parser_callback_t limit_depth = [](int depth, Json::parse_event_t, Json&) {
            if (depth > kMaxDepth) {
                throw ApiError(
                    400, "the JSON body nests deeper than " + std::to_string(kMaxDepth) + " levels",
                    "invalid_request_error");
            }
            return true;
        };
        return Json::parse(body.begin(), body.end(), limit_depth);
    } catch (const Json::parse_error& e) {
        throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(),
                       "invalid_request_error");
    }
}

}  // namespace

engine::SamplingOptions SamplingFields::over(const engine::SamplingOptions& defaults) const {
    engine::SamplingOptions out = defaults;
    if (temperature) out.temperature = *temperature;
    if (top_p) out.top_p = *top_p;
    if (top_k) out.top_k = *top_k;
    if (presence_penalty) out.presence_penalty = *presence_penalty;
    if (frequency_penalty) out.frequency_penalty = *frequency_penalty;
    if (repetition_penalty) out.repetition_penalty = *repetition_penalty;
    if (seed) out.seed = *seed;
    return out;
}

bool valid_request_id(std::string_view id) {
    if (id.empty() || id.size() > 80) return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    });
}

CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint) {
    const Json json = parse_json(body);
    if (!json.is_object()) throw_bad_field("", "the body must be a JSON object");
    const bool chat = endpoint == Endpoint::Chat;
    CompletionRequest request;
    request.endpoint = endpoint;

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
        "messages", "max_completion_tokens", "top_logprobs",
        "tools",    "tool_choice",           "parallel_tool_calls"};
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

    if (const Json* v = member(json, "model")) request.model = string(*v, "model");
    if (const Json* v = member(json, "request_id")) {
        request.request_id = string(*v, "request_id");
        if (!valid_request_id(request.request_id)) {
            throw_bad_field("request_id", "must be 1-80 ASCII letters, digits, '-' or '_'");
        }
    }
    if (const Json* v = member(json, "n"); v != nullptr && integer(*v, "n", 1, 128) != 1) {
        throw_bad_field("n", "only n = 1 is supported");
    }

    const Json* max_tokens = member(json, "max_tokens");
    if (chat && max_tokens == nullptr) max_tokens = member(json, "max_completion_tokens");
    if (max_tokens != nullptr) {
        const std::string name =
            member(json, "max_tokens") != nullptr ? "max_tokens" : "max_completion_tokens";
        request.max_tokens = integer(*max_tokens, name, 1, std::numeric_limits<int32_t>::max());
    }

    SamplingFields& s = request.sampling;
    if (const Json* v = member(json, "temperature"))
        s.temperature = number(*v, "temperature", 0, 2);
    if (const Json* v = member(json, "top_p")) s.top_p = number(*v, "top_p", 0, 1, true);
    if (const Json* v = member(json, "top_k")) {
        // -1 is "off" to vLLM and llama.cpp clients, 0 to ours.
        s.top_k = static_cast<int32_t>(
            std::max<int64_t>(integer(*v, "top_k", -1, std::numeric_limits<int32_t>::max()), 0));
    }
    if (const Json* v = member(json, "presence_penalty"))
        s.presence_penalty = number(*v, "presence_penalty", -2, 2);
    if (const Json* v = member(json, "frequency_penalty"))
        s.frequency_penalty = number(*v, "frequency_penalty", -2, 2);
    if (const Json* v = member(json, "repetition_penalty"))
        s.repetition_penalty = number(*v, "repetition_penalty", 0, 10, true);
    if (const Json* v = member(json, "seed")) {
        s.seed = static_cast<uint64_t>(integer(*v, "seed", std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max()));
    }
    if (const Json* v = member(json, "stop")) request.stop = parse_stop(*v);

    if (const Json* v = member(json, "stream")) request.stream = boolean(*v, "stream");
    if (const Json* v = member(json, "stream_options")) {
        if (!request.stream) {
            throw_bad_field("stream_options", "is only allowed when stream is true");
        }
        if (!v->is_object()) throw_bad_field("stream_options", "must be an object");
        for (const auto& [key, option] : v->items()) {
            if (key != "include_usage") throw_bad_field("stream_options." + key, "unknown field");
            if (!option.is_null()) {
                request.include_usage = boolean(option, "stream_options.include_usage");
            }
        }
    }

    if (chat) {
        if (const Json* v = member(json, "logprobs")) request.logprobs = boolean(*v, "logprobs");
        if (const Json* v = member(json, "top_logprobs")) {
            request.top_logprobs =
                static_cast<int>(integer(*v, "top_logprobs", 0, kMaxTopLogprobs));
            if (!request.logprobs) {
                throw_bad_field("top_logprobs", "needs logprobs set to true");
            }
        }
        const Json* messages = member(json, "messages");
        if (messages == nullptr) throw_bad_field("messages", "is required");
        if (!messages->is_array() || messages->empty()) {
            throw_bad_field("messages", "must be a non-empty array of messages");
        }
        try {
            request.messages = text::parse_messages(*messages);
            text::validate_conversation(request.messages);
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
            request.top_logprobs = static_cast<int>(integer(*v, "logprobs", 0, kMaxTopLogprobs));
        }
        const Json* prompt = member(json, "prompt");
        if (prompt == nullptr) throw_bad_field("prompt", "is required");
        parse_prompt(*prompt, request);
        if (const Json* v = member(json, "echo"); v != nullptr && boolean(*v, "echo")) {
            throw_bad_field("echo", "echoing the prompt is not supported", "unsupported_parameter");
        }
        if (const Json* v = member(json, "best_of");
            v != nullptr && integer(*v, "best_of", 1, 128) != 1) {
            throw_bad_field("best_of", "only best_of = 1 is supported", "unsupported_parameter");
        }
    }
    return request;
}

}  // namespace cherenkov::serving
