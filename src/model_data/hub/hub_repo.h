// Names on the Hugging Face Hub: repository IDs ("owner/name"), revisions (branches, tags, commits;
// may contain slashes), commits (40 hex), and how each is spelled in URLs and the cache
// (docs/formats.md §5.2, §5.3).
#pragma once

#include <string>
#include <string_view>

namespace cherenkov::model_data::hub {

inline constexpr std::string_view kDefaultEndpoint = "https://huggingface.co";

// Lowercase or uppercase hex digits only (and at least one).
bool is_hex(std::string_view text);
// A full commit: exactly 40 hex digits.
bool is_full_commit(std::string_view text);

// Throws InvalidInput naming `what` unless `repo` is "owner/name": two non-empty parts of
// [A-Za-z0-9._-], neither "." nor "..", neither starting with '.' or '-'.
void validate_repo_id(std::string_view repo, const std::string& what);

// Throws InvalidInput naming `what` unless `revision` is a usable branch, tag or commit:
// non-empty segments separated by '/', no "." or ".." segment, no '?', '#', '%', whitespace or
// control characters.
void validate_revision(std::string_view revision, const std::string& what);

// Percent-encodes every byte outside [A-Za-z0-9._~-] ("refs/pr/1" -> "refs%2Fpr%2F1").
std::string encode_revision(std::string_view revision);

// "models--owner--name" (the cache folder of a model repository).
std::string cache_folder_name(std::string_view repo);

// HF_ENDPOINT rules: empty -> the default; trailing '/' removed; must be http(s).
std::string normalize_endpoint(std::string_view endpoint);

}  // namespace cherenkov::model_data::hub
