#include "model_data/hub/hub_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "model_data/hub/hub_repo.h"
#include "model_data/sources/http_request.h"

namespace cherenkov::model_data::hub {
namespace {

bool is_transient(long status) {
    return status == 429 || status >= 500;
}

void backoff(int attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250) * (1 << attempt));
}

std::string encode_path(const std::string& path) {
    std::string out;
    size_t start = 0;
    while (true) {
        const size_t slash = path.find('/', start);
        out +=
            encode_revision(path.substr(start, slash == std::string::npos ? slash : slash - start));
        if (slash == std::string::npos) break;
        out += '/';
        start = slash + 1;
    }
    return out;
}

Error status_error(const HttpResponse& response, const std::string& what) {
    return Error(http_status_kind(response.status),
                 what + ": " +
                     describe_http_status(response.status, response.header("x-error-code"),
                                          response.header("x-error-message")));
}

// Writes the body of a download into an open file, truncating it when the server restarts.
class PartialFile {
public:
    PartialFile(std::string path, const DownloadProgress& progress)
        : path_(std::move(path)), progress_(progress) {
        const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) throw_errno("cannot create " + path_, errno);
        fd_ = UniqueFd(fd);
        struct stat info {};
        if (::fstat(fd, &info) != 0) throw_errno("cannot stat " + path_, errno);
        size_ = static_cast<uint64_t>(info.st_size);
        if (::lseek(fd, 0, SEEK_END) < 0) throw_errno("cannot seek " + path_, errno);
    }

    uint64_t size() const { return size_; }
    const std::optional<Error>& failure() const { return failure_; }

    void truncate() {
        if (::ftruncate(fd_.get(), 0) != 0 || ::lseek(fd_.get(), 0, SEEK_SET) < 0) {
            throw_errno("cannot truncate " + path_, errno);
        }
        size_ = 0;
    }

    // The sink for http_get: `status` 200 means the whole file follows (Range ignored).
    bool write(std::span<const char> data, long status) {
        if (first_chunk_) {
            first_chunk_ = false;
            if (status == 200 && size_ != 0) {
                try {
                    truncate();
                } catch (const Error& error) {
                    failure_ = error;
                    return false;
                }
            }
        }
        size_t done = 0;
        while (done < data.size()) {
            const ssize_t n = ::write(fd_.get(), data.data() + done, data.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                failure_ = Error(errno == ENOSPC ? ErrorKind::ResourceExhausted : ErrorKind::Io,
                                 "cannot write " + path_ + ": " + std::strerror(errno));
                return false;
            }
            done += static_cast<size_t>(n);
        }
        size_ += data.size();
        if (progress_) progress_(size_);
        return true;
    }

    void begin_attempt() { first_chunk_ = true; }

    void finish() {
        if (::fsync(fd_.get()) != 0) throw_errno("cannot sync " + path_, errno);
        fd_ = UniqueFd();
    }

private:
    std::string path_;
    const DownloadProgress& progress_;
    UniqueFd fd_;
    uint64_t size_ = 0;
    bool first_chunk_ = true;
    std::optional<Error> failure_;
};

}  // namespace

HubClient::HubClient(HubOptions options) : options_(std::move(options)) {
    options_.endpoint = normalize_endpoint(options_.endpoint);
    if (options_.max_attempts < 1) options_.max_attempts = 1;
}

RevisionInfo HubClient::resolve_revision(const std::string& repo,
                                         const std::string& revision) const {
    const std::string what = "hf://" + repo + "@" + revision;
    validate_repo_id(repo, what);
    validate_revision(revision, what);
    HttpGet request;
    request.url = options_.endpoint + "/api/models/" + repo + "/revision/" +
                  encode_revision(revision) + "?blobs=true";
    for (int attempt = 0;; ++attempt) {
        const bool last = attempt + 1 >= options_.max_attempts;
        HttpResponse response;
        try {
            response = http_get(request, options_.http);
        } catch (const Error& error) {
            if (error.kind() != ErrorKind::Io || last) {
                throw Error(error.kind(),
                            what + ": cannot reach " + options_.endpoint + ": " + error.what());
            }
            backoff(attempt);
            continue;
        }
        if (response.status == 200) return parse_revision_info(response.body, request.url);
        if (!is_transient(response.status) || last) throw status_error(response, what);
        backoff(attempt);
    }
}

std::string HubClient::resolve_url(const std::string& repo, const std::string& commit,
                                   const std::string& path) const {
    return options_.endpoint + "/" + repo + "/resolve/" + commit + "/" + encode_path(path);
}

std::unique_ptr<ObjectStore> HubClient::open_snapshot(const std::string& repo,
                                                      const std::string& commit) const {
    return open_http_store(options_.endpoint + "/" + repo + "/resolve/" + commit, options_.http);
}

uint64_t HubClient::download(const std::string& repo, const std::string& commit,
                             const RepoFile& file, const std::string& destination,
                             const DownloadProgress& progress) const {
    const std::string what = "hf://" + repo + "@" + commit + "/" + file.path;
    validate_repo_file_path(file.path, what);
    const std::string partial_path = destination + kIncompleteSuffix;
    PartialFile partial(partial_path, progress);
    if (file.size_bytes && partial.size() > *file.size_bytes) partial.truncate();
    HttpGet request;
    request.url = resolve_url(repo, commit, file.path);
    request.sink = [&partial](std::span<const char> data, long status) {
        return partial.write(data, status);
    };
    for (int attempt = 0;; ++attempt) {
        const bool last = attempt + 1 >= options_.max_attempts;
        if (file.size_bytes && partial.size() == *file.size_bytes) break;
        request.range_start =
            partial.size() > 0 ? std::optional<uint64_t>(partial.size()) : std::nullopt;
        partial.begin_attempt();
        HttpResponse response;
        try {
            response = http_get(request, options_.http);
        } catch (const Error& error) {
            if (partial.failure()) throw *partial.failure();
            if (error.kind() != ErrorKind::Io || last) {
                throw Error(error.kind(), what + ": download failed: " + error.what());
            }
            backoff(attempt);
            continue;
        }
        if (response.status == 200 || response.status == 206) {
            const std::string encoding = response.header("content-encoding");
            if (!encoding.empty() && encoding != "identity") {
                std::string message = what;
                message.append(": the server compressed the download (").append(encoding) += ')';
                throw_unsupported(message);
            }
            if (!file.size_bytes) break;
            if (partial.size() == *file.size_bytes) break;
            if (last) {
                throw_io(what + ": received " + std::to_string(partial.size()) + " of " +
                         std::to_string(*file.size_bytes) + " bytes");
            }
            continue;  // a short body: resume where it stopped
        }
        if (response.status == 416) {
            // Already complete, or the file changed under us: start again from zero.
            if (file.size_bytes && partial.size() == *file.size_bytes) break;
            partial.truncate();
            if (last) throw status_error(response, what);
            continue;
        }
        if (!is_transient(response.status) || last) throw status_error(response, what);
        backoff(attempt);
    }
    if (file.size_bytes && partial.size() != *file.size_bytes) {
        throw_corrupt(what + ": downloaded " + std::to_string(partial.size()) +
                      " bytes, the Hub lists " + std::to_string(*file.size_bytes));
    }
    const uint64_t size = partial.size();
    partial.finish();
    if (::rename(partial_path.c_str(), destination.c_str()) != 0) {
        throw_errno("cannot publish " + destination, errno);
    }
    sync_parent_directory(destination);
    return size;
}

}  // namespace cherenkov::model_data::hub
