// The simplest ExpertSource: no cache. Every fetch reads each requested record from the expert
// table file with pread into a buffer owned by the batch. Used by tests, by `--pool-gb 0`, and
// as the baseline the expert cache is measured against.
#pragma once

#include <atomic>
#include <string>

#include "base/unique_fd.h"
#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

class DirectExpertReader final : public ExpertSource {
public:
    // Opens `experts_path` (experts.bin / experts3.bin / experts2.bin) laid out as `layout`.
    // Throws NotFound / Corrupt when the file is missing or its size disagrees with the layout.
    DirectExpertReader(const std::string& experts_path, const store::ExpertLayout& layout);

    const store::ExpertLayout& layout() const override { return layout_; }
    std::unique_ptr<ExpertBatch> fetch(int64_t layer,
                                       std::span<const ExpertRequest> requests) override;

    ExpertSourceFigures figures() const override { return {.read_bytes = bytes_read()}; }

    uint64_t bytes_read() const { return bytes_read_.load(); }
    uint64_t records_read() const { return records_read_.load(); }

private:
    std::string path_;
    store::ExpertLayout layout_;
    UniqueFd fd_;
    std::atomic<uint64_t> bytes_read_{0};
    std::atomic<uint64_t> records_read_{0};
};

}  // namespace cherenkov::engine
