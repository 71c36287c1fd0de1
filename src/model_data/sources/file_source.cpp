// Local files and directories behind the ByteSource / ObjectStore interfaces.
#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {
namespace {

class FileSource final : public ByteSource {
public:
    explicit FileSource(std::string path)
        : path_(std::move(path)), fd_(open_read_only(path_)), size_(file_size(fd_.get(), path_)) {}

    const std::string& name() const override { return path_; }
    uint64_t size() const override { return size_; }

    void read(uint64_t offset, std::span<std::byte> out) const override {
        if (offset > size_ || out.size() > size_ - offset) {
            throw_corrupt(path_ + ": read of " + std::to_string(out.size()) + " bytes at byte " +
                          std::to_string(offset) + " runs past the end (file has " +
                          std::to_string(size_) + " bytes)");
        }
        pread_exact(fd_.get(), out, offset, path_);
    }

    std::shared_ptr<const MappedFile> mapping() const override {
        // Mapped lazily, once; later callers share the same mapping.
        std::call_once(map_once_, [this] { mapping_ = MappedFile::open(path_); });
        return mapping_;
    }

private:
    std::string path_;
    UniqueFd fd_;
    uint64_t size_;
    mutable std::once_flag map_once_;
    mutable std::shared_ptr<const MappedFile> mapping_;
};

class DirectoryStore final : public ObjectStore {
public:
    explicit DirectoryStore(std::string directory) : directory_(std::move(directory)) {}

    const std::string& location() const override { return directory_; }

    bool exists(const std::string& relative_name) const override {
        std::error_code ec;
        return std::filesystem::is_regular_file(path_of(relative_name), ec);
    }

    std::unique_ptr<ByteSource> open(const std::string& relative_name) const override {
        return open_file_source(path_of(relative_name));
    }

    std::optional<std::vector<std::string>> list() const override {
        std::vector<std::string> names;
        for (const auto& entry : std::filesystem::directory_iterator(directory_)) {
            if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
        }
        return names;
    }

private:
    std::string path_of(const std::string& relative_name) const {
        // Shard names come from index files; refuse ones that would leave the directory.
        std::filesystem::path relative(relative_name);
        if (relative.is_absolute() || relative_name.find("..") != std::string::npos) {
            throw_invalid(directory_ + ": object name '" + relative_name +
                          "' must be a plain relative name");
        }
        return (std::filesystem::path(directory_) / relative).string();
    }

    std::string directory_;
};

}  // namespace

std::vector<std::byte> ByteSource::read_range(uint64_t offset, uint64_t n_bytes) const {
    if (offset > size() || n_bytes > size() - offset) {
        throw_corrupt(name() + ": range of " + std::to_string(n_bytes) + " bytes at byte " +
                      std::to_string(offset) + " runs past the end (" + std::to_string(size()) +
                      " bytes)");
    }
    std::vector<std::byte> bytes(n_bytes);
    read(offset, bytes);
    return bytes;
}

std::string ObjectStore::read_text(const std::string& relative_name) const {
    auto source = open(relative_name);
    auto bytes = source->read_range(0, source->size());
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::unique_ptr<ByteSource> open_file_source(const std::string& path) {
    return std::make_unique<FileSource>(path);
}

std::unique_ptr<ObjectStore> open_directory_store(const std::string& directory) {
    std::error_code ec;
    if (!std::filesystem::is_directory(directory, ec)) {
        throw_not_found(directory + ": not a directory");
    }
    return std::make_unique<DirectoryStore>(directory);
}

}  // namespace cherenkov::model_data
