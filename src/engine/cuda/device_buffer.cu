// DeviceBuffer over the CUDA runtime (device_buffer.h).
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/device_buffer.h"

namespace cherenkov::engine::cuda {
namespace {

void check_range(size_t offset, size_t bytes, size_t size) {
    if (offset > size || bytes > size - offset) {
        throw_invalid("[device_buffer] copy of " + std::to_string(bytes) + " bytes at " +
                      std::to_string(offset) + " past the end of " + std::to_string(size));
    }
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
    if (bytes > 0) CHERENKOV_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
    reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
    check_range(offset, bytes, size_);
    CHERENKOV_CUDA_CHECK(
        cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
    check_range(offset, bytes, size_);
    CHERENKOV_CUDA_CHECK(
        cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill(unsigned char value) {
    CHERENKOV_CUDA_CHECK(cudaMemset(data_, value, size_));
}

void DeviceBuffer::reset() {
    if (data_ != nullptr) cudaFree(data_);  // destructors release without throwing
    data_ = nullptr;
    size_ = 0;
}

void device_synchronize() {
    CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace cherenkov::engine::cuda
