#include "model_data/sources/http_request.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

struct CurlEasyDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct CurlListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct Transfer {
    CURL* curl = nullptr;
    const HttpGet* request = nullptr;
    HttpResponse response;
    bool sink_refused = false;
    bool too_large = false;
};

long current_status(CURL* curl) {
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    const size_t n_bytes = size * count;
    const long status = current_status(transfer->curl);
    const bool success = status >= 200 && status < 300;
    if (success && transfer->request->sink) {
        if (!transfer->request->sink(std::span<const char>(data, n_bytes), status)) {
            transfer->sink_refused = true;
            return 0;
        }
        return n_bytes;
    }
    if (transfer->response.body.size() + n_bytes > transfer->request->max_collected_bytes) {
        transfer->too_large = true;
        return 0;
    }
    transfer->response.body.append(data, n_bytes);
    return n_bytes;
}

std::string trim(std::string text) {
    auto space = [](unsigned char c) { return std::isspace(c) != 0; };
    while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.pop_back();
    size_t first = 0;
    while (first < text.size() && space(static_cast<unsigned char>(text[first]))) ++first;
    return text.substr(first);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* transfer = static_cast<Transfer*>(user);
    const std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        // A new response (the first, or one after a redirect): keep only the last one's headers.
        transfer->response.headers.clear();
        transfer->response.body.clear();
        return size * count;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return size * count;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    transfer->response.headers[trim(name)] = trim(line.substr(colon + 1));
    return size * count;
}

}  // namespace

std::string describe_http_status(long status, const std::string& error_code,
                                 const std::string& error_message) {
    const std::string token_hint = "pass --hf-token or set HF_TOKEN";
    switch (status) {
        case 401:
            if (error_code == "GatedRepo") {
                return "401 unauthorized: gated repository; accept its terms on the Hub, then " +
                       token_hint;
            }
            if (error_message == "Invalid credentials in Authorization header") {
                return "401 unauthorized: the token was rejected (invalid credentials)";
            }
            return "401 unauthorized: the repository is private or does not exist, or needs a "
                   "token (" +
                   token_hint + ")";
        case 403:
            if (error_code == "GatedRepo") {
                return "403 forbidden: gated repository; this token has not been granted access "
                       "(accept its terms on the Hub)";
            }
            return "403 forbidden: the token lacks access (gated repository or token scope)";
        case 404:
            if (error_code == "RevisionNotFound") return "404 not found: no such revision";
            if (error_code == "EntryNotFound") return "404 not found: no such file";
            if (error_code == "RepoNotFound") return "404 not found: no such repository";
            return "404 not found";
        case 416: return "416 range not satisfiable";
        case 429: return "429 too many requests: rate limited, retry later";
        default:
            if (status >= 500) return "HTTP status " + std::to_string(status) + " (server error)";
            return "HTTP status " + std::to_string(status);
    }
}

ErrorKind http_status_kind(long status) {
    if (status == 404) return ErrorKind::NotFound;
    if (status == 401 || status == 403) return ErrorKind::InvalidInput;
    return ErrorKind::Io;
}

std::string HttpResponse::header(const std::string& lowercase_name) const {
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? std::string() : it->second;
}

HttpResponse http_get(const HttpGet& request, const HttpOptions& options) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    std::unique_ptr<CURL, CurlEasyDeleter> curl(curl_easy_init());
    if (!curl) throw_internal("curl_easy_init failed");
    Transfer transfer;
    transfer.curl = curl.get();
    transfer.request = &request;
    std::unique_ptr<curl_slist, CurlListDeleter> headers;
    if (!options.bearer_token.empty()) {
        const std::string auth = "Authorization: Bearer " + options.bearer_token;
        headers.reset(curl_slist_append(nullptr, auth.c_str()));
    }
    std::string range;
    if (request.range_start) range = std::to_string(*request.range_start) + "-";
    CURL* handle = curl.get();
    curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
    if (!range.empty()) curl_easy_setopt(handle, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
    curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 10L);
    // libcurl sends a custom Authorization header only to the original host on redirects.
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_seconds);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, options.stall_timeout_seconds);
    curl_easy_setopt(handle, CURLOPT_USERAGENT, "cherenkov/0.1");
    curl_easy_setopt(handle, CURLOPT_ACCEPT_ENCODING, "identity");
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
    if (headers) curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
    const CURLcode code = curl_easy_perform(handle);
    transfer.response.status = current_status(handle);
    if (code == CURLE_WRITE_ERROR && transfer.sink_refused) {
        throw Error(ErrorKind::Cancelled, request.url + ": transfer stopped");
    }
    if (code == CURLE_WRITE_ERROR && transfer.too_large) {
        throw_corrupt(request.url + ": response larger than " +
                      std::to_string(request.max_collected_bytes) + " bytes");
    }
    if (code != CURLE_OK) throw_io(request.url + ": " + curl_easy_strerror(code));
    return std::move(transfer.response);
}

}  // namespace cherenkov::model_data
