// Model selectors, shared by every command that takes a model (seed "Select a model"):
//   NAME                          an alias or a model ID; 8-40 hex digits also match a commit
//                                 prefix. Never downloads.
//   hf://owner/repo[@revision]    a Hugging Face repository; revisions may contain slashes
//   disk://STORE/owner/repo[@rev] a repository inside a registered filesystem store
//   PATH                          anything with a '/' (or starting with '.' or '~'): a checkpoint,
//                                 a packed store, a file
//   model:NAME                    legacy spelling of NAME
// URIs use literal names: queries, fragments, percent-escapes and dot segments are rejected.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cherenkov::store {

struct HfUri {
    std::string repo;                     // owner/name
    std::optional<std::string> revision;  // absent: unqualified
};

struct DiskUri {
    std::string store;  // the store's registered name
    std::string repo;
    std::optional<std::string> revision;
};

enum class SelectorKind { Name, Hf, Disk, Path, Url };

struct Selector {
    SelectorKind kind = SelectorKind::Name;
    std::string text;  // as given
    std::string name;  // Name
    HfUri hf;          // Hf
    DiskUri disk;      // Disk
    std::string path;  // Path (as given), Url (http(s) URL, for `inspect`)
};

// Throws InvalidInput naming the selector and the problem.
Selector parse_selector(std::string_view text);
HfUri parse_hf_uri(std::string_view text);      // "hf://..."
DiskUri parse_disk_uri(std::string_view text);  // "disk://..."

// The minimum length of a commit prefix selector.
inline constexpr size_t kMinCommitPrefix = 8;
// 8-40 hex digits: may select by commit prefix.
bool is_commit_prefix(std::string_view text);

// Parses an HF cache refs/<revision> file: a 40-hex commit, surrounding whitespace allowed.
// Throws Corrupt naming `file`.
std::string parse_cache_ref(std::string_view contents, const std::string& file);

}  // namespace cherenkov::store
