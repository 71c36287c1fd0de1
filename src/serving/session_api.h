// The session endpoints' JSON (seed "Sessions"; docs/serving.md): the body of POST /v1/sessions
// (sampling settings, seed and context_tokens, each checked as in a completion request) and the
// session object GET /v1/sessions/{id} and POST /v1/sessions answer with.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "serving/json_fields.h"
#include "serving/session_store.h"

namespace cherenkov::serving {

struct SessionRequest {
    SamplingFields sampling;
    std::optional<int64_t> context_tokens;  // absent: the server's context
};

// Parses the body (empty means all defaults). Throws ApiError 400 naming the field for
// malformed JSON, wrong types, out-of-range values and unknown fields; context_tokens must be in
// [1, max_ctx].
SessionRequest parse_session_request(std::string_view body, int64_t max_ctx);

// {"id", "object": "session", "created", "turns", "messages", "history_bytes",
//  "context_tokens", "busy", "sampling": {...}, "usage": {...}}
nlohmann::json session_json(const SessionInfo& info);

}  // namespace cherenkov::serving
