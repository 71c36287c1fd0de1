#include "store/index/selector.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "model_data/hub/hub_repo.h"
#include "store/index/catalog.h"

namespace cherenkov::store {
namespace {

namespace hub = model_data::hub;

void reject_url_syntax(std::string_view text) {
    const std::string quoted = "'" + std::string(text) + "'";
    if (text.find('?') != std::string_view::npos) {
        throw_invalid(quoted + ": queries are not allowed in model URIs");
    }
    if (text.find('#') != std::string_view::npos) {
        throw_invalid(quoted + ": fragments are not allowed in model URIs");
    }
    if (text.find('%') != std::string_view::npos) {
        throw_invalid(quoted + ": use literal repository names (no percent-escapes)");
    }
    for (char c : text) {
        if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
            throw_invalid(quoted + ": model URIs may not contain spaces or control characters");
        }
    }
}

// Splits "owner/repo[@revision]" (the part after the scheme and store).
void split_repo(std::string_view rest, std::string_view whole, std::string& repo,
                std::optional<std::string>& revision) {
    const std::string what = "'" + std::string(whole) + "'";
    const size_t at = rest.find('@');
    const std::string_view repo_part = rest.substr(0, at);
    for (size_t start = 0; start <= repo_part.size();) {
        const size_t slash = std::min(repo_part.find('/', start), repo_part.size());
        const std::string_view segment = repo_part.substr(start, slash - start);
        if (segment == "." || segment == "..") {
            throw_invalid(what + ": dot segments are not allowed in model URIs");
        }
        start = slash + 1;
    }
    hub::validate_repo_id(repo_part, what);
    repo = std::string(repo_part);
    if (at != std::string_view::npos) {
        const std::string_view rev = rest.substr(at + 1);
        hub::validate_revision(rev, what);
        revision = std::string(rev);
    }
}

}  // namespace

bool is_commit_prefix(std::string_view text) {
    return text.size() >= kMinCommitPrefix && text.size() <= 40 && hub::is_hex(text);
}

HfUri parse_hf_uri(std::string_view text) {
    constexpr std::string_view kScheme = "hf://";
    if (text.substr(0, kScheme.size()) != kScheme) {
        throw_invalid("'" + std::string(text) + "' is not an hf:// URI");
    }
    reject_url_syntax(text);
    HfUri uri;
    split_repo(text.substr(kScheme.size()), text, uri.repo, uri.revision);
    return uri;
}

DiskUri parse_disk_uri(std::string_view text) {
    constexpr std::string_view kScheme = "disk://";
    if (text.substr(0, kScheme.size()) != kScheme) {
        throw_invalid("'" + std::string(text) + "' is not a disk:// URI");
    }
    reject_url_syntax(text);
    const std::string_view rest = text.substr(kScheme.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
        throw_invalid("'" + std::string(text) + "': expected disk://STORE/owner/repo");
    }
    DiskUri uri;
    const std::string_view store = rest.substr(0, slash);
    if (store == "." || store == "..") {
        throw_invalid("'" + std::string(text) + "': dot segments are not allowed in model URIs");
    }
    validate_store_name(store, "'" + std::string(text) + "'");
    uri.store = std::string(store);
    split_repo(rest.substr(slash + 1), text, uri.repo, uri.revision);
    return uri;
}

Selector parse_selector(std::string_view text) {
    Selector selector;
    selector.text = std::string(text);
    if (text.empty()) throw_invalid("empty model selector");
    if (text.find('\0') != std::string_view::npos) {
        throw_invalid("model selector contains a NUL byte");
    }
    if (text.rfind("hf://", 0) == 0) {
        selector.kind = SelectorKind::Hf;
        selector.hf = parse_hf_uri(text);
        return selector;
    }
    if (text.rfind("disk://", 0) == 0) {
        selector.kind = SelectorKind::Disk;
        selector.disk = parse_disk_uri(text);
        return selector;
    }
    if (text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0) {
        selector.kind = SelectorKind::Url;
        selector.path = std::string(text);
        return selector;
    }
    const size_t scheme = text.find("://");
    if (scheme != std::string_view::npos && text.find('/') > scheme) {
        throw_invalid("'" + std::string(text) + "': unknown scheme (use hf://, disk:// or a path)");
    }
    if (text.rfind("model:", 0) == 0) {
        const std::string_view name = text.substr(6);
        if (name.empty() || name.find('/') != std::string_view::npos) {
            throw_invalid("'" + std::string(text) + "': expected model:NAME");
        }
        selector.kind = SelectorKind::Name;
        selector.name = std::string(name);
        return selector;
    }
    if (text.find('/') != std::string_view::npos || text.front() == '.' || text.front() == '~') {
        selector.kind = SelectorKind::Path;
        selector.path = std::string(text);
        return selector;
    }
    selector.kind = SelectorKind::Name;
    selector.name = std::string(text);
    return selector;
}

std::string parse_cache_ref(std::string_view contents, const std::string& file) {
    std::string commit(contents);
    auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!commit.empty() && space(commit.back())) commit.pop_back();
    commit.erase(commit.begin(), std::find_if_not(commit.begin(), commit.end(), space));
    if (!hub::is_full_commit(commit)) {
        throw_corrupt(file + ": expected a 40-hex-digit commit");
    }
    std::transform(commit.begin(), commit.end(), commit.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return commit;
}

}  // namespace cherenkov::store
