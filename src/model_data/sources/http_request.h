// One HTTP GET with libcurl: optional Range, redirects, the final response's headers, and the body
// either collected (small JSON documents) or streamed to a sink (downloads). The bearer token is
// sent as a header and never appears in URLs, messages or the returned response.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "base/error.h"
#include "model_data/sources/http_source.h"

namespace cherenkov::model_data {

struct HttpResponse {
    long status = 0;
    // Headers of the last response (after redirects), names lowercased, values trimmed.
    std::map<std::string, std::string> headers;
    std::string body;  // collected only when no sink was given, and only for 2xx / error pages

    std::string header(const std::string& lowercase_name) const;
};

struct HttpGet {
    std::string url;
    std::optional<uint64_t> range_start;  // sends "Range: bytes=<start>-"
    bool follow_redirects = true;
    // Bytes of a 2xx body; returning false aborts the transfer (reported as Cancelled).
    // Called with the response status known (see status()).
    std::function<bool(std::span<const char>, long status)> sink;
    size_t max_collected_bytes = 64u << 20;
};

// "401 unauthorized: ..." for a failed status, using the Hub's X-Error-Code / X-Error-Message
// headers when present (docs/formats.md §5.5), with what to do about it. Never includes
// credentials.
std::string describe_http_status(long status, const std::string& error_code,
                                 const std::string& error_message);
// NotFound for 404, InvalidInput for 401 / 403 (credentials or access), Io otherwise.
ErrorKind http_status_kind(long status);

// Performs the request. Transport failures (DNS, refused connection, timeouts, a body cut off)
// throw Io naming the URL; HTTP statuses are returned, not thrown.
HttpResponse http_get(const HttpGet& request, const HttpOptions& options);

}  // namespace cherenkov::model_data
