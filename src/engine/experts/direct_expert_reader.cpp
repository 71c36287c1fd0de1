#include "engine/experts/direct_expert_reader.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "engine/experts/in_order_batch.h"

namespace cherenkov::engine {
namespace {

// Record buffers are 4096-aligned like the pool's slots, so kernels see the same alignment.
struct AlignedFree {
    void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;

AlignedBuffer allocate_aligned(uint64_t n_bytes) {
    void* p =
        std::aligned_alloc(store::kRecordAlign, store::align_up(n_bytes, store::kRecordAlign));
    if (p == nullptr)
        throw Error(ErrorKind::ResourceExhausted, "out of memory for an expert record");
    return AlignedBuffer(static_cast<std::byte*>(p));
}

// Reads every record at fetch time and owns them; delivers them in request order.
class DirectBatch final : public InOrderBatch {
public:
    DirectBatch(std::vector<AlignedBuffer> records, const store::ExpertLayout& layout)
        : InOrderBatch(views_of(records), layout), records_(std::move(records)) {}

private:
    static std::vector<const std::byte*> views_of(const std::vector<AlignedBuffer>& records) {
        std::vector<const std::byte*> views;
        for (const AlignedBuffer& r : records) views.push_back(r.get());
        return views;
    }
    std::vector<AlignedBuffer> records_;
};

}  // namespace

DirectExpertReader::DirectExpertReader(const std::string& experts_path,
                                       const store::ExpertLayout& layout)
    : path_(experts_path), layout_(layout) {
    int fd = ::open(experts_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("cannot open expert table " + experts_path, errno);
    fd_ = UniqueFd(fd);
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw_errno("cannot stat " + experts_path, errno);
    if (static_cast<uint64_t>(st.st_size) != layout_.file_bytes()) {
        throw_corrupt(experts_path + ": size " + std::to_string(st.st_size) +
                      " bytes, the manifest's expert layout needs " +
                      std::to_string(layout_.file_bytes()));
    }
}

std::unique_ptr<ExpertBatch> DirectExpertReader::fetch(int64_t layer,
                                                       std::span<const ExpertRequest> requests) {
    if (layer < 0 || layer >= layout_.n_layers()) {
        throw_invalid("expert layer " + std::to_string(layer) + " outside the table's " +
                      std::to_string(layout_.n_layers()) + " layers");
    }
    std::vector<AlignedBuffer> records;
    records.reserve(requests.size());
    for (const ExpertRequest& request : requests) {
        if (request.expert < 0 || request.expert >= layout_.n_experts) {
            throw_invalid("expert " + std::to_string(request.expert) + " outside [0, " +
                          std::to_string(layout_.n_experts) + ")");
        }
        AlignedBuffer buffer = allocate_aligned(layout_.record_bytes);
        pread_exact(fd_.get(), std::span(buffer.get(), layout_.record_bytes),
                    layout_.record_offset(layer, request.expert), path_);
        records.push_back(std::move(buffer));
        bytes_read_ += layout_.record_bytes;
        ++records_read_;
    }
    return std::make_unique<DirectBatch>(std::move(records), layout_);
}

}  // namespace cherenkov::engine
