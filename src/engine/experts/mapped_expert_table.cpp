#include "engine/experts/mapped_expert_table.h"

#include <sys/mman.h>

#include <vector>

#include "base/error.h"
#include "engine/experts/in_order_batch.h"

namespace cherenkov::engine {

MappedExpertTable::MappedExpertTable(const std::string& experts_path,
                                     const store::ExpertLayout& layout)
    // Shared: locking a private file mapping may make the kernel copy every page it pins.
    : file_(MappedFile::open(experts_path, /*shared=*/true)), layout_(layout) {
    if (file_->bytes().size() != layout_.file_bytes()) {
        throw_corrupt(experts_path + ": size " + std::to_string(file_->bytes().size()) +
                      " bytes, the manifest's expert layout needs " +
                      std::to_string(layout_.file_bytes()));
    }
    // Start reading the table in the background: records are touched at random, and page by page
    // each first touch would wait for a small read of its own. Only advice: failure changes
    // nothing.
    if (!file_->bytes().empty()) {
        ::madvise(const_cast<std::byte*>(file_->bytes().data()), file_->bytes().size(),
                  MADV_WILLNEED);
    }
}

std::unique_ptr<ExpertBatch> MappedExpertTable::fetch(int64_t layer,
                                                      std::span<const ExpertRequest> requests) {
    if (layer < 0 || layer >= layout_.n_layers()) {
        throw_invalid("expert layer " + std::to_string(layer) + " outside the table's " +
                      std::to_string(layout_.n_layers()) + " layers");
    }
    std::vector<const std::byte*> records;
    records.reserve(requests.size());
    for (const ExpertRequest& request : requests) {
        if (request.expert < 0 || request.expert >= layout_.n_experts) {
            throw_invalid("expert " + std::to_string(request.expert) + " outside [0, " +
                          std::to_string(layout_.n_experts) + ")");
        }
        records.push_back(file_->bytes().data() + layout_.record_offset(layer, request.expert));
    }
    bytes_served_ += records.size() * layout_.record_bytes;
    records_served_ += records.size();
    return std::make_unique<InOrderBatch>(std::move(records), layout_);
}

}  // namespace cherenkov::engine
