// Host memory for the expert pool: n_slots slots of slot_bytes each, every slot 4096-aligned so
// records can be read into it with O_DIRECT and used in place. One anonymous mapping, allocated
// once at load and advised for transparent huge pages; prefaulted at load by default, so no read
// during decode pays for first-touch page faults (lazy pools commit pages as reads fill them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cherenkov::engine {

class SlotPool {
public:
    enum class Pages { Prefault, Lazy };

    // slot_bytes must be a multiple of 4096. Throws ResourceExhausted when the mapping fails.
    SlotPool(uint64_t n_slots, uint64_t slot_bytes, Pages pages = Pages::Prefault);
    ~SlotPool();
    SlotPool(const SlotPool&) = delete;
    SlotPool& operator=(const SlotPool&) = delete;

    uint64_t n_slots() const { return n_slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    std::byte* slot(uint64_t index) const { return base_ + index * slot_bytes_; }
    // The first n_bytes of a slot (a record may be smaller than the slot: Q2 in a Q4-sized slot).
    std::span<std::byte> slot_span(uint64_t index, uint64_t n_bytes) const {
        return {slot(index), n_bytes};
    }
    // The whole mapping.
    std::span<std::byte> memory() const { return {base_, n_slots_ * slot_bytes_}; }

private:
    uint64_t n_slots_ = 0;
    uint64_t slot_bytes_ = 0;
    std::byte* base_ = nullptr;
};

}  // namespace cherenkov::engine
