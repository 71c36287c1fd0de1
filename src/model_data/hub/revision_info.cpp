#include "model_data/hub/revision_info.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model_data/hub/hub_repo.h"

namespace cherenkov::model_data::hub {

using nlohmann::json;

void validate_repo_file_path(std::string_view path, const std::string& what) {
    if (path.empty() || path.size() > 1024 || path.front() == '/') {
        throw_corrupt(what + ": file path '" + std::string(path) + "' is not a relative path");
    }
    size_t start = 0;
    while (true) {
        const size_t slash = path.find('/', start);
        const std::string_view segment = path.substr(
            start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (segment.empty() || segment == "." || segment == "..") {
            throw_corrupt(what + ": file path '" + std::string(path) +
                          "' has an empty, '.' or '..' segment");
        }
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    for (char c : path) {
        if (c == '\\' || static_cast<unsigned char>(c) < 0x20) {
            throw_corrupt(what + ": file path '" + std::string(path) +
                          "' contains a backslash or a control character");
        }
    }
}

RevisionInfo parse_revision_info(std::string_view json_text, const std::string& what) {
    json document;
    try {
        document = json::parse(json_text);
    } catch (const json::exception& error) {
        throw_corrupt(what + ": not valid JSON: " + error.what());
    }
    if (!document.is_object()) throw_corrupt(what + ": expected a JSON object");
    RevisionInfo info;
    const auto sha = document.find("sha");
    if (sha == document.end() || !sha->is_string() || !is_full_commit(sha->get<std::string>())) {
        throw_corrupt(what + ": field 'sha' must be a 40-hex-digit commit");
    }
    info.commit = sha->get<std::string>();
    std::transform(info.commit.begin(), info.commit.end(), info.commit.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (const auto gated = document.find("gated"); gated != document.end()) {
        if (gated->is_string()) {
            info.gated = gated->get<std::string>();
        } else if (!gated->is_boolean() && !gated->is_null()) {
            throw_corrupt(what + ": field 'gated' must be false, \"auto\" or \"manual\"");
        } else if (gated->is_boolean() && gated->get<bool>()) {
            info.gated = "auto";
        }
    }
    if (const auto priv = document.find("private"); priv != document.end() && priv->is_boolean()) {
        info.is_private = priv->get<bool>();
    }
    const auto siblings = document.find("siblings");
    if (siblings == document.end() || siblings->is_null()) return info;
    if (!siblings->is_array()) throw_corrupt(what + ": field 'siblings' must be an array");
    for (size_t index = 0; index < siblings->size(); ++index) {
        const json& entry = (*siblings)[index];
        const std::string field = what + ": siblings[" + std::to_string(index) + "]";
        if (!entry.is_object()) throw_corrupt(field + " must be an object");
        const auto name = entry.find("rfilename");
        if (name == entry.end() || !name->is_string()) {
            throw_corrupt(field + ".rfilename must be a string");
        }
        RepoFile file;
        file.path = name->get<std::string>();
        validate_repo_file_path(file.path, field + ".rfilename");
        // LFS files report the payload size under lfs.size; "size" is the pointer's otherwise.
        const json* size = nullptr;
        if (const auto lfs = entry.find("lfs"); lfs != entry.end() && lfs->is_object()) {
            if (const auto lfs_size = lfs->find("size"); lfs_size != lfs->end()) size = &*lfs_size;
        }
        if (size == nullptr) {
            if (const auto plain = entry.find("size"); plain != entry.end()) size = &*plain;
        }
        if (size != nullptr && !size->is_null()) {
            if (!size->is_number_unsigned()) {
                throw_corrupt(field + ".size must be a non-negative integer");
            }
            file.size_bytes = size->get<uint64_t>();
        }
        info.files.push_back(std::move(file));
    }
    return info;
}

}  // namespace cherenkov::model_data::hub
