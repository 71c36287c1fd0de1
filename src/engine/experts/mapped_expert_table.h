// An ExpertSource with no cache of its own: the expert table file is mapped read-only and every
// record is used where it lies, so the page cache is the host tier (`--host-pool-gb mapped` with
// CUDA, `--pool-gb mapped` on the CPU). Why: when the table fits in RAM, reading a record into a
// slot is pure overhead, and on the GPU path it is worse than that. A record a CPU thread has just
// written (a pread from the page cache leaves its lines dirty in the CPU caches) copies to the
// device at 28-31 GB/s, where clean memory copies at 50-52 GB/s (dev/cuda/02_host_copy_probe, H200
// machine): the DMA has to snoop the dirty lines. A mapping registered with the device is copied
// from directly, with no read and no staging copy. Needs RAM for the whole table: the first touch
// of a page reads it from disk, and registering the mapping faults in (and locks) all of it.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "base/file.h"
#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

class MappedExpertTable final : public ExpertSource {
public:
    // Maps `experts_path` (experts.bin / experts3.bin / experts2.bin) laid out as `layout`, and
    // asks the kernel to start reading it into the page cache. Throws NotFound / Io when the file
    // cannot be opened or mapped, Corrupt when its size disagrees with the layout.
    MappedExpertTable(const std::string& experts_path, const store::ExpertLayout& layout);

    const store::ExpertLayout& layout() const override { return layout_; }
    // Every requested record at once, in request order: nothing is read.
    std::unique_ptr<ExpertBatch> fetch(int64_t layer,
                                       std::span<const ExpertRequest> requests) override;
    // The whole mapping: records never move, so a device backend registers it once.
    RecordMemory record_memory() const override {
        return RecordMemory{.bytes = file_->bytes(), .read_only = true};
    }

    bool records_outlive_batches() const override { return true; }
    // Bytes handed out in place count as read; there is no cache.
    ExpertSourceFigures figures() const override { return {.read_bytes = bytes_served()}; }

    // Records handed out and their bytes (what a device backend then copies).
    uint64_t bytes_served() const { return bytes_served_.load(); }
    uint64_t records_served() const { return records_served_.load(); }

private:
    std::shared_ptr<const MappedFile> file_;
    store::ExpertLayout layout_;
    std::atomic<uint64_t> bytes_served_{0};
    std::atomic<uint64_t> records_served_{0};
};

}  // namespace cherenkov::engine
