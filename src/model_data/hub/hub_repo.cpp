#include "model_data/hub/hub_repo.h"

#include <cctype>

#include "base/error.h"

namespace cherenkov::model_data::hub {
namespace {

bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_hex(std::string_view text) {
    if (text.empty()) return false;
    for (char c : text) {
        if (std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
    }
    return true;
}

bool is_full_commit(std::string_view text) {
    return text.size() == 40 && is_hex(text);
}

void validate_repo_id(std::string_view repo, const std::string& what) {
    const size_t slash = repo.find('/');
    if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos) {
        throw_invalid(what + ": repository '" + std::string(repo) +
                      "' must be owner/name (exactly one '/')");
    }
    for (std::string_view part : {repo.substr(0, slash), repo.substr(slash + 1)}) {
        if (part.empty() || part.size() > 96) {
            throw_invalid(what + ": repository '" + std::string(repo) +
                          "' has an empty or overlong owner or name");
        }
        if (part.front() == '.' || part.front() == '-') {
            throw_invalid(what + ": repository '" + std::string(repo) +
                          "': owner and name may not start with '.' or '-'");
        }
        for (char c : part) {
            if (!is_name_char(c)) {
                throw_invalid(what + ": repository '" + std::string(repo) +
                              "' may only contain letters, digits, '.', '_' and '-' (no escapes)");
            }
        }
    }
}

void validate_revision(std::string_view revision, const std::string& what) {
    if (revision.empty()) throw_invalid(what + ": empty revision after '@'");
    if (revision.size() > 256) throw_invalid(what + ": revision longer than 256 characters");
    size_t start = 0;
    while (true) {
        const size_t slash = revision.find('/', start);
        const std::string_view segment = revision.substr(
            start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (segment.empty() || segment == "." || segment == "..") {
            throw_invalid(what + ": revision '" + std::string(revision) +
                          "' has an empty, '.' or '..' segment");
        }
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    for (char c : revision) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x21 || byte == 0x7f || c == '?' || c == '#' || c == '%' || c == '\\') {
            throw_invalid(what + ": revision '" + std::string(revision) +
                          "' may not contain '?', '#', '%', '\\', spaces or control characters");
        }
    }
}

std::string encode_revision(std::string_view revision) {
    static const char* kHex = "0123456789ABCDEF";
    std::string out;
    for (char c : revision) {
        const auto byte = static_cast<unsigned char>(c);
        if (std::isalnum(byte) != 0 || c == '.' || c == '_' || c == '~' || c == '-') {
            out.push_back(c);
        } else {
            out.push_back('%');
            out.push_back(kHex[byte >> 4]);
            out.push_back(kHex[byte & 15]);
        }
    }
    return out;
}

std::string cache_folder_name(std::string_view repo) {
    std::string out = "models--";
    for (char c : repo) {
        if (c == '/') {
            out += "--";
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string normalize_endpoint(std::string_view endpoint) {
    std::string out(endpoint.empty() ? kDefaultEndpoint : endpoint);
    while (!out.empty() && out.back() == '/') out.pop_back();
    if (out.rfind("http://", 0) != 0 && out.rfind("https://", 0) != 0) {
        throw_invalid("HF_ENDPOINT '" + out + "' must start with http:// or https://");
    }
    const size_t authority = out.find("://") + 3;
    const std::string host = out.substr(authority, out.find('/', authority) - authority);
    if (host.empty() || host.find('@') != std::string::npos) {
        throw_invalid("HF_ENDPOINT must name a host and may not carry credentials");
    }
    if (out.find_first_of("?#") != std::string::npos) {
        throw_invalid("HF_ENDPOINT '" + out + "' may not contain a query or fragment");
    }
    return out;
}

}  // namespace cherenkov::model_data::hub
