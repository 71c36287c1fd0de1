// The chat page's files (src/serving/web/), compiled into the binary by CMake
// (cmake/embed_files.cmake writes web_assets() into a generated source), served by GET / and
// GET /<file> so the page works with no files beside the binary and no network.
#pragma once

#include <algorithm>
#include <span>
#include <string_view>

namespace cherenkov::serving {

struct WebAsset {
    std::string_view path;  // "/index.html", "/app.js", ...
    std::string_view content_type;
    std::string_view bytes;
};

// Every embedded file, sorted by path.
std::span<const WebAsset> web_assets();

// The file served at `path` ("/" is "/index.html"), or null.
inline const WebAsset* find_web_asset(std::string_view path) {
    if (path == "/") path = "/index.html";
    const std::span<const WebAsset> assets = web_assets();
    const auto it = std::find_if(assets.begin(), assets.end(),
                                 [&](const WebAsset& a) { return a.path == path; });
    return it == assets.end() ? nullptr : &*it;
}

}  // namespace cherenkov::serving
