#include "model_data/sources/http_source.h"

#include <curl/curl.h>

#include <cstring>
#include <mutex>

#include "base/error.h"
#include "model_data/sources/http_request.h"

namespace cherenkov::model_data {
namespace {

void ensure_curl_initialized() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlEasyDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct CurlListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct RangeResponse {
    CURL* curl = nullptr;
    long status = 0;
    std::string content_range;
    std::string error_code;     // X-Error-Code (docs/formats.md §5.5)
    std::string error_message;  // X-Error-Message
    std::vector<std::byte> body;
    size_t body_limit = 0;  // stop storing beyond this (a server that ignores Range)
    bool overflowed = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* response = static_cast<RangeResponse*>(user);
    size_t n_bytes = size * count;
    long status = 0;
    curl_easy_getinfo(response->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300) return n_bytes;  // an error page: the status says enough
    if (response->body.size() + n_bytes > response->body_limit) {
        response->overflowed = true;
        return 0;  // aborts the transfer
    }
    auto* bytes = reinterpret_cast<const std::byte*>(data);
    response->body.insert(response->body.end(), bytes, bytes + n_bytes);
    return n_bytes;
}

// Stores the value of header `key` (lowercase, with colon) from `line` into `out`.
void take_header(const std::string& line, const char* key, std::string& out) {
    if (line.size() <= std::strlen(key) || strncasecmp(line.c_str(), key, std::strlen(key)) != 0) return;
    std::string value = line.substr(std::strlen(key));
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(value.begin());
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    out = value;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* response = static_cast<RangeResponse*>(user);
    std::string line(data, size * count);
    take_header(line, "content-range:", response->content_range);
    take_header(line, "x-error-code:", response->error_code);
    take_header(line, "x-error-message:", response->error_message);
    return size * count;
}

std::string describe_status(const RangeResponse& response) {
    return describe_http_status(response.status, response.error_code, response.error_message);
}

// Performs GET url with "Range: bytes=first-last".
RangeResponse get_range(const std::string& url, uint64_t first, uint64_t last, const HttpOptions& options) {
    ensure_curl_initialized();
    std::unique_ptr<CURL, CurlEasyDeleter> curl(curl_easy_init());
    if (!curl) throw_internal("curl_easy_init failed");
    RangeResponse response;
    response.curl = curl.get();
    response.body_limit = static_cast<size_t>(last - first + 1);
    std::string range = std::to_string(first) + "-" + std::to_string(last);
    std::unique_ptr<curl_slist, CurlListDeleter> headers;
    if (!options.bearer_token.empty()) {
        std::string auth = "Authorization: Bearer " + options.bearer_token;
        headers.reset(curl_slist_append(nullptr, auth.c_str()));
    }
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, options.connect_timeout_seconds);
    curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_TIME, options.stall_timeout_seconds);
    curl_easy_setopt(curl.get(), CURLOPT_USERAGENT, "cherenkov/0.1");
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl.get(), CURLOPT_HEADERDATA, &response);
    if (headers) curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
    CURLcode code = curl_easy_perform(curl.get());
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &response.status);
    if (code == CURLE_WRITE_ERROR && response.overflowed) {
        if (response.status == 200) {
            throw_unsupported(url + ": the server ignores HTTP range requests (answered 200 with the whole file)");
        }
        throw_corrupt(url + ": the server sent more bytes than the requested range " + range);
    }
    if (code != CURLE_OK) throw_io(url + ": " + curl_easy_strerror(code));
    return response;
}

// Parses the total from "bytes a-b/TOTAL" or "bytes */TOTAL".
uint64_t total_from_content_range(const std::string& content_range, const std::string& url) {
    auto slash = content_range.rfind('/');
    if (slash == std::string::npos || slash + 1 >= content_range.size() || content_range[slash + 1] == '*') {
        throw_corrupt(url + ": Content-Range '" + content_range + "' gives no total size");
    }
    try {
        size_t used = 0;
        uint64_t total = std::stoull(content_range.substr(slash + 1), &used);
        if (slash + 1 + used != content_range.size()) throw std::invalid_argument("trailing text");
        return total;
    } catch (const std::exception&) {
        throw_corrupt(url + ": Content-Range '" + content_range + "' has no valid total size");
    }
}

class HttpSource final : public ByteSource {
public:
    HttpSource(std::string url, HttpOptions options) : url_(std::move(url)), options_(std::move(options)) {
        RangeResponse probe = get_range(url_, 0, 0, options_);
        if (probe.status == 416) {
            size_ = total_from_content_range(probe.content_range, url_);  // an empty object
            return;
        }
        if (probe.status == 200) {
            throw_unsupported(url_ + ": the server ignores HTTP range requests (answered 200, not 206)");
        }
        if (probe.status != 206) {
            throw Error(http_status_kind(probe.status), url_ + ": " + describe_status(probe));
        }
        size_ = total_from_content_range(probe.content_range, url_);
    }

    const std::string& name() const override { return url_; }
    uint64_t size() const override { return size_; }

    void read(uint64_t offset, std::span<std::byte> out) const override {
        if (out.empty()) return;
        if (offset > size_ || out.size() > size_ - offset) {
            throw_corrupt(url_ + ": read of " + std::to_string(out.size()) + " bytes at byte " +
                          std::to_string(offset) + " runs past the end (" + std::to_string(size_) + " bytes)");
        }
        RangeResponse response = get_range(url_, offset, offset + out.size() - 1, options_);
        if (response.status != 206) {
            if (response.status == 200) {
                throw_unsupported(url_ + ": the server ignores HTTP range requests (answered 200, not 206)");
            }
            throw Error(http_status_kind(response.status), url_ + ": " + describe_status(response));
        }
        if (response.body.size() != out.size()) {
            throw_corrupt(url_ + ": asked for " + std::to_string(out.size()) + " bytes at byte " +
                          std::to_string(offset) + ", received " + std::to_string(response.body.size()));
        }
        std::memcpy(out.data(), response.body.data(), out.size());
    }

private:
    std::string url_;
    HttpOptions options_;
    uint64_t size_ = 0;
};

class HttpStore final : public ObjectStore {
public:
    HttpStore(std::string base_url, HttpOptions options) : base_url_(std::move(base_url)), options_(std::move(options)) {
        while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
    }

    const std::string& location() const override { return base_url_; }

    bool exists(const std::string& relative_name) const override {
        try {
            open(relative_name);
            return true;
        } catch (const Error& error) {
            if (error.kind() == ErrorKind::NotFound) return false;
            throw;
        }
    }

    std::unique_ptr<ByteSource> open(const std::string& relative_name) const override {
        if (relative_name.empty() || relative_name.find("..") != std::string::npos || relative_name.front() == '/' ||
            relative_name.find_first_of("?#%") != std::string::npos) {
            throw_invalid(base_url_ + ": object name '" + relative_name + "' must be a plain relative name");
        }
        return open_http_source(base_url_ + "/" + relative_name, options_);
    }

    std::optional<std::vector<std::string>> list() const override { return std::nullopt; }

private:
    std::string base_url_;
    HttpOptions options_;
};

}  // namespace

bool is_http_url(const std::string& text) {
    return text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0;
}

std::unique_ptr<ByteSource> open_http_source(const std::string& url, const HttpOptions& options) {
    return std::make_unique<HttpSource>(url, options);
}

std::unique_ptr<ObjectStore> open_http_store(const std::string& base_url, const HttpOptions& options) {
    return std::make_unique<HttpStore>(base_url, options);
}

}  // namespace cherenkov::model_data
