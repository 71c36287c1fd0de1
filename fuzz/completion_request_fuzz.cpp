// Fuzzes the request-body parser and validator of the completion endpoints: the first byte picks
// the endpoint, the rest is the body. Every input must either parse or be refused with a 400
// ApiError whose error object serializes; any other exception or crash is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "serving/api_error.h"
#include "serving/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const auto endpoint = (data[0] & 1) != 0 ? cherenkov::serving::Endpoint::Completion
                                             : cherenkov::serving::Endpoint::Chat;
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        const cherenkov::serving::CompletionRequest request =
            cherenkov::serving::parse_completion_request(body, endpoint);
        // What the parser promises of a request it accepts.
        if (request.stop.size() > cherenkov::serving::kMaxStopStrings) std::abort();
        if (request.top_logprobs < 0 || request.top_logprobs > cherenkov::serving::kMaxTopLogprobs)
            std::abort();
        if (!request.request_id.empty() &&
            !cherenkov::serving::valid_request_id(request.request_id))
            std::abort();
        if (endpoint == cherenkov::serving::Endpoint::Chat && request.messages.empty())
            std::abort();
    } catch (const cherenkov::serving::ApiError& e) {
        if (e.status() != 400) {
            std::fprintf(stderr, "status %d: %s\n", e.status(), e.what());
            std::abort();
        }
        (void)e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return 0;
}
