#include "engine/experts/slot_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {

SlotPool::SlotPool(uint64_t n_slots, uint64_t slot_bytes, Pages pages)
    : n_slots_(n_slots), slot_bytes_(slot_bytes) {
    if (slot_bytes == 0 || slot_bytes % 4096 != 0) {
        throw_internal("expert slot size " + std::to_string(slot_bytes) +
                       " is not a positive multiple of 4096");
    }
    if (n_slots == 0) return;
    void* base = ::mmap(nullptr, n_slots * slot_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        throw Error(ErrorKind::ResourceExhausted,
                    "cannot map an expert pool of " + std::to_string(n_slots) + " slots (" +
                        std::to_string(n_slots * slot_bytes) + " bytes): " + std::strerror(errno));
    }
    base_ = static_cast<std::byte*>(base);
    // Fewer, larger pages make the O_DIRECT reads' page pinning cheaper; advisory only.
    ::madvise(base, n_slots * slot_bytes, MADV_HUGEPAGE);
    if (pages == Pages::Lazy) return;
    constexpr uint64_t kPage = 4096;
    for (uint64_t offset = 0; offset < n_slots * slot_bytes; offset += kPage) {
        base_[offset] = std::byte{0};
    }
}

SlotPool::~SlotPool() {
    if (base_ != nullptr) ::munmap(base_, n_slots_ * slot_bytes_);
}

}  // namespace cherenkov::engine
