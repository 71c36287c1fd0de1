// A Hugging Face Hub client over libcurl (docs/formats.md §5.3, §5.4): resolves revisions to
// commits with the file list, opens a commit's files for range reads, and downloads files with
// resume. Every URL is built from the endpoint (HF_ENDPOINT); the token travels only as a bearer
// header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "model_data/hub/revision_info.h"
#include "model_data/sources/byte_source.h"
#include "model_data/sources/http_source.h"

namespace cherenkov::model_data::hub {

struct HubOptions {
    std::string endpoint = "https://huggingface.co";  // normalized (no trailing '/')
    HttpOptions http;                                 // carries the bearer token
    int max_attempts = 3;  // for network failures, 429 and 5xx; with backoff
};

// Bytes of the current file written so far (including bytes resumed from an earlier attempt).
using DownloadProgress = std::function<void(uint64_t file_bytes_done)>;

class HubClient {
public:
    explicit HubClient(HubOptions options);

    const std::string& endpoint() const { return options_.endpoint; }

    // GET {E}/api/models/{repo}/revision/{revision}?blobs=true. Errors name "hf://repo@revision"
    // and say what to do for 401 / 403 (gated) / 404, and "cannot reach" for network failures.
    RevisionInfo resolve_revision(const std::string& repo, const std::string& revision) const;

    // {E}/{repo}/resolve/{commit}/{path}, each path segment percent-encoded.
    std::string resolve_url(const std::string& repo, const std::string& commit,
                            const std::string& path) const;

    // The commit's files for range reads (servers that ignore Range are rejected).
    std::unique_ptr<ObjectStore> open_snapshot(const std::string& repo,
                                               const std::string& commit) const;

    // Downloads `file` to `destination`, writing `destination + ".incomplete"` first and resuming
    // it with a Range request when it exists (a 200 answer restarts from zero). The finished file
    // is checked against the expected size, synced and renamed into place. Returns its size.
    uint64_t download(const std::string& repo, const std::string& commit, const RepoFile& file,
                      const std::string& destination, const DownloadProgress& progress) const;

private:
    HubOptions options_;
};

// The suffix of a file being downloaded.
inline constexpr const char* kIncompleteSuffix = ".incomplete";

}  // namespace cherenkov::model_data::hub
