// Fuzzes the body parser of POST /v1/messages (Anthropic's Messages API): the first byte picks
// whether max_tokens is required (messages) or not (count_tokens), the rest is the body. Every
// input must parse into a chat request the renderer can take, or be refused with a 400 ApiError
// whose Anthropic error object serializes; any other exception or crash is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "serving/anthropic/messages_format.h"
#include "serving/anthropic/messages_request.h"
#include "serving/api_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    namespace serving = cherenkov::serving;
    if (size == 0) return 0;
    serving::anthropic::MessagesParseOptions options;
    options.require_max_tokens = (data[0] & 1) == 0;
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        const serving::CompletionRequest request =
            serving::anthropic::parse_messages_request(body, options);
        // What the parser promises of a request it accepts.
        if (request.endpoint != serving::Endpoint::Chat || request.messages.empty()) std::abort();
        if (request.stop.size() > serving::anthropic::kMaxStopSequences) std::abort();
        if (options.require_max_tokens && !request.max_tokens) std::abort();
        if (request.messages.back().role == cherenkov::text::Role::Assistant) std::abort();
        if (!request.tools.tools.empty() && !request.tools_json.is_array()) std::abort();
    } catch (const serving::ApiError& e) {
        if (e.status() != 400) {
            std::fprintf(stderr, "status %d: %s\n", e.status(), e.what());
            std::abort();
        }
        (void)serving::anthropic::error_json(e).dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace);
    }
    return 0;
}
