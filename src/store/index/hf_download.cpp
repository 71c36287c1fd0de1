#include "store/index/hf_download.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "model_data/hub/hub_client.h"
#include "model_data/qwen4_exp/config.h"
#include "model_data/safetensors/safetensors_checkpoint.h"
#include "store/packer/packer.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;
namespace hub = model_data::hub;

bool ends_with(const std::string& text, std::string_view suffix) {
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Top-level configuration, tokenizer and template files.
bool is_metadata(const std::string& path) {
    if (path.find('/') != std::string::npos) return false;
    for (std::string_view suffix : {".json", ".jinja", ".txt", ".model", ".tiktoken"}) {
        if (ends_with(path, suffix)) return true;
    }
    return false;
}

uint64_t existing_bytes(const std::string& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    return ec ? 0 : size;
}

// qwen4_exp is what `prepare` can pack; checked on config.json before any weights move.
void check_architecture(const std::string& config_path, const std::string& what) {
    try {
        model_data::qwen4_exp::parse_config(read_text_file(config_path), config_path);
    } catch (const Error& error) {
        throw Error(ErrorKind::Unsupported,
                    what + ": not a qwen4_exp checkpoint Cherenkov can prepare: " + error.what());
    }
}

}  // namespace

SnapshotResult download_snapshot(const SnapshotDownload& request, const std::string& directory,
                                 const IndexOptions& options) {
    const std::string what = "hf://" + request.repo + "@" + request.commit;
    hub::HubClient client(options.hub);
    emit_status(options, "listing files of " + what);
    const hub::RevisionInfo info = client.resolve_revision(request.repo, request.commit);
    SnapshotResult result;
    result.commit = info.commit;
    std::error_code ec;
    fs::create_directories(directory, ec);
    if (ec) throw_io(directory + ": cannot create directory: " + ec.message());

    auto fetch = [&](const hub::RepoFile& file, uint64_t& bytes_done, uint64_t bytes_total,
                     uint64_t files_done, uint64_t files_total) {
        const std::string destination = directory + "/" + file.path;
        if (fs::exists(destination, ec) &&
            (!file.size_bytes || existing_bytes(destination) == *file.size_bytes)) {
            bytes_done += existing_bytes(destination);
            return;
        }
        fs::create_directories(fs::path(destination).parent_path(), ec);
        const uint64_t start = bytes_done;
        const uint64_t got =
            client.download(request.repo, info.commit, file, destination, [&](uint64_t file_bytes) {
                emit(options, IndexEvent{IndexEvent::Kind::Download, file.path, files_done,
                                         files_total, start + file_bytes, bytes_total});
            });
        bytes_done = start + got;
        result.bytes_downloaded += got;
    };

    std::vector<hub::RepoFile> metadata;
    for (const hub::RepoFile& file : info.files) {
        if (is_metadata(file.path)) metadata.push_back(file);
    }
    uint64_t metadata_total = 0;
    for (const hub::RepoFile& file : metadata) metadata_total += file.size_bytes.value_or(0);
    uint64_t metadata_bytes = 0;
    for (size_t index = 0; index < metadata.size(); ++index) {
        fetch(metadata[index], metadata_bytes, metadata_total, index, metadata.size());
    }
    result.n_files = metadata.size();
    if (!fs::exists(directory + "/config.json", ec)) {
        throw_not_found(what + ": the repository has no config.json");
    }
    check_architecture(directory + "/config.json", what);
    if (request.metadata_only) return result;

    // The shards: named by the index (docs/formats.md §1.6), else model.safetensors.
    std::vector<std::string> shard_names;
    const std::string index_path = directory + "/" + std::string(model_data::kShardIndexName);
    if (fs::exists(index_path, ec)) {
        shard_names =
            model_data::parse_shard_index(read_text_file(index_path), index_path).shard_names;
    } else {
        shard_names.push_back("model.safetensors");
    }
    std::vector<hub::RepoFile> shards;
    uint64_t bytes_total = 0;
    uint64_t bytes_missing = 0;
    for (const std::string& name : shard_names) {
        const hub::RepoFile* listed = nullptr;
        for (const hub::RepoFile& file : info.files) {
            if (file.path == name) listed = &file;
        }
        if (listed == nullptr) {
            std::string message = what;
            message.append(": shard '")
                .append(name)
                .append("' is not in the repository's file list");
            throw_corrupt(message);
        }
        hub::validate_repo_file_path(name, what);
        shards.push_back(*listed);
        const uint64_t size = listed->size_bytes.value_or(0);
        bytes_total += size;
        std::string path = directory;
        path.append("/").append(name);
        const uint64_t complete = existing_bytes(path);
        path.append(hub::kIncompleteSuffix);
        const uint64_t have = std::max(complete, existing_bytes(path));
        bytes_missing += size > have ? size - have : 0;
    }
    require_disk_space(directory, bytes_missing + request.extra_bytes_needed,
                       "downloading " + what + " and packing it");
    uint64_t bytes_done = 0;
    for (size_t index = 0; index < shards.size(); ++index) {
        fetch(shards[index], bytes_done, bytes_total, index, shards.size());
        emit(options, IndexEvent{IndexEvent::Kind::Download, shards[index].path, index + 1,
                                 shards.size(), bytes_done, bytes_total});
    }
    result.n_files += shards.size();
    return result;
}

}  // namespace cherenkov::store
