// In-memory bytes behind the ByteSource interface; immutable after construction, so reads from
// several threads need no lock.
#include "model_data/sources/memory_source.h"

#include <algorithm>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

class MemorySource final : public ByteSource {
public:
    MemorySource(std::string name, std::vector<std::byte> bytes)
        : name_(std::move(name)), bytes_(std::move(bytes)) {}

    const std::string& name() const override { return name_; }
    uint64_t size() const override { return bytes_.size(); }

    void read(uint64_t offset, std::span<std::byte> out) const override {
        if (offset > bytes_.size() || out.size() > bytes_.size() - offset) {
            throw_corrupt(name_ + ": read of " + std::to_string(out.size()) + " bytes at byte " +
                          std::to_string(offset) + " runs past the end (object has " +
                          std::to_string(bytes_.size()) + " bytes)");
        }
        std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
    }

private:
    std::string name_;
    std::vector<std::byte> bytes_;
};

}  // namespace

std::unique_ptr<ByteSource> open_memory_source(std::string name, std::vector<std::byte> bytes) {
    return std::make_unique<MemorySource>(std::move(name), std::move(bytes));
}

}  // namespace cherenkov::model_data
