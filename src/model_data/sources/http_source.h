// Remote objects read with HTTP range requests (libcurl), so inspecting a remote checkpoint
// fetches only config files and safetensors headers. Servers that ignore Range are rejected.
#pragma once

#include <memory>
#include <string>

#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {

struct HttpOptions {
    // Sent as "Authorization: Bearer <token>" when non-empty; never included in messages.
    std::string bearer_token;
    long connect_timeout_seconds = 30;
    // A transfer slower than 1 KB/s for this long is abandoned.
    long stall_timeout_seconds = 60;
};

// Opens one remote object; its size comes from a one-byte range request.
std::unique_ptr<ByteSource> open_http_source(const std::string& url, const HttpOptions& options);

// Objects under a base URL ("https://host/owner/repo/resolve/<commit>"): `open("config.json")`
// fetches "<base>/config.json". Listing is not available over plain HTTP.
std::unique_ptr<ObjectStore> open_http_store(const std::string& base_url, const HttpOptions& options);

bool is_http_url(const std::string& text);

}  // namespace cherenkov::model_data
