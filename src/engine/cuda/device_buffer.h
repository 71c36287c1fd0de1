// Device memory for callers that must not see CUDA types (tests, the engine's plain C++ code):
// a move-only owner of one cudaMalloc allocation with synchronous copies. Built from
// device_buffer.cu with CUDA, or from unavailable.cpp without it, where every
// allocation throws Unsupported "built without CUDA".
#pragma once

#include <cstddef>

namespace cherenkov::engine::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);  // uninitialized; 256-byte aligned (cudaMalloc)
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const { return data_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(data_);
    }
    size_t size() const { return size_; }

    // Synchronous copies of [offset, offset + bytes) after all work queued on the legacy default
    // stream; throw InvalidInput past the end and Internal on a CUDA error.
    void upload(const void* host, size_t bytes, size_t offset = 0);
    void download(void* host, size_t bytes, size_t offset = 0) const;
    // Sets every byte to `value` (0xFF makes float NaNs: outputs poisoned before a check).
    void fill(unsigned char value);

    void reset();  // frees; never throws

private:
    void* data_ = nullptr;
    size_t size_ = 0;
};

// Waits for all work on the current device; throws Internal with a pending kernel error.
void device_synchronize();

}  // namespace cherenkov::engine::cuda
