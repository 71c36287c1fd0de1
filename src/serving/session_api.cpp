#include "serving/session_api.h"

#include <set>
#include <string>

#include "serving/api_error.h"

namespace cherenkov::serving {

SessionRequest parse_session_request(std::string_view body, int64_t max_ctx) {
    SessionRequest request;
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return request;
    const BodyJson json = parse_body(body);
    if (!json.is_object()) throw_bad_field("", "the body must be a JSON object");
    // model, user and metadata change nothing here, as in completion requests.
    static const std::set<std::string, std::less<>> kIgnored = {"model", "user", "metadata"};
    for (const auto& [key, value] : json.items()) {
        if (kIgnored.count(key) != 0 || key == "context_tokens") continue;
        bool sampling = false;
        for (const char* name : kSamplingFieldNames) sampling = sampling || key == name;
        if (!sampling) throw_bad_field(key, "unknown field", "unknown_parameter");
    }
    if (const BodyJson* v = member(json, "model")) string_field(*v, "model");
    request.sampling = parse_sampling_fields(json);
    if (const BodyJson* v = member(json, "context_tokens")) {
        request.context_tokens = integer_field(*v, "context_tokens", 1, max_ctx);
    }
    return request;
}

nlohmann::json session_json(const SessionInfo& info) {
    const engine::SamplingOptions& s = info.sampling;
    const SessionUsage& u = info.usage;
    return {{"id", info.id},
            {"object", "session"},
            {"created", info.created},
            {"turns", info.turns},
            {"messages", info.messages},
            {"history_bytes", info.history_bytes},
            {"context_tokens", info.context_tokens},
            {"busy", info.busy},
            {"sampling",
             {{"temperature", s.temperature},
              {"top_p", s.top_p},
              {"top_k", s.top_k},
              {"presence_penalty", s.presence_penalty},
              {"frequency_penalty", s.frequency_penalty},
              {"repetition_penalty", s.repetition_penalty},
              {"seed", s.seed}}},
            {"usage",
             {{"prompt_tokens", u.prompt_tokens},
              {"cached_tokens", u.cached_tokens},
              {"generated_tokens", u.generated_tokens},
              {"prefill_seconds", u.prefill_seconds},
              {"decode_seconds", u.decode_seconds}}}};
}

}  // namespace cherenkov::serving
