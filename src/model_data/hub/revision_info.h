// The Hub's answer to GET {E}/api/models/{repo}/revision/{rev}?blobs=true (docs/formats.md §5.3):
// the commit a revision resolves to and the files of that commit with their sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::model_data::hub {

struct RepoFile {
    std::string path;  // "config.json", "model-00001-of-00002.safetensors", "sub/dir/file"
    std::optional<uint64_t> size_bytes;
};

struct RevisionInfo {
    std::string commit;  // 40 hex, lowercase
    std::vector<RepoFile> files;
    std::string gated;  // "" (not gated), "auto" or "manual"
    bool is_private = false;
};

// Parses the JSON; throws Corrupt naming `what` and the field for anything malformed: a missing
// or non-hex "sha", siblings without a relative, dot-segment-free "rfilename", negative sizes.
// Unknown fields are ignored (the Hub adds fields freely).
RevisionInfo parse_revision_info(std::string_view json_text, const std::string& what);

// Throws Corrupt naming `what` unless `path` is a relative file path inside a repository:
// non-empty segments, no "." / ".." segment, no backslash, NUL or leading '/'.
void validate_repo_file_path(std::string_view path, const std::string& what);

}  // namespace cherenkov::model_data::hub
