// DeviceBuffer in builds without nvcc: allocating or copying throws "built without CUDA".
#include "base/error.h"
#include "engine/cuda/device_buffer.h"

namespace cherenkov::engine::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
    if (bytes > 0) throw_unsupported("[device_buffer] built without CUDA");
}

DeviceBuffer::~DeviceBuffer() {
    reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
    return *this;
}

void DeviceBuffer::upload(const void*, size_t, size_t) {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::download(void*, size_t, size_t) const {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::fill(unsigned char) {
    throw_unsupported("[device_buffer] built without CUDA");
}

void DeviceBuffer::reset() {
    data_ = nullptr;
    size_ = 0;
}

void device_synchronize() {
    throw_unsupported("[device_buffer] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
