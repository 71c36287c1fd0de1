// Fuzzes the body parser of POST /v1/sessions (serving/session_api.h): every input must either
// parse, with context_tokens within the server's context, or be refused with a 400 ApiError whose
// error object serializes; any other exception or crash is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "serving/api_error.h"
#include "serving/session_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    constexpr int64_t kMaxCtx = 4096;
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    try {
        const cherenkov::serving::SessionRequest request =
            cherenkov::serving::parse_session_request(body, kMaxCtx);
        if (request.context_tokens &&
            (*request.context_tokens < 1 || *request.context_tokens > kMaxCtx))
            std::abort();
        if (request.sampling.temperature && !(*request.sampling.temperature >= 0.0F)) std::abort();
    } catch (const cherenkov::serving::ApiError& e) {
        if (e.status() != 400) {
            std::fprintf(stderr, "status %d: %s\n", e.status(), e.what());
            std::abort();
        }
        (void)e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return 0;
}
