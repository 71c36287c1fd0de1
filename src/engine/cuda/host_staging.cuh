// Page-locked host memory that calls fill and copy to the device asynchronously, reused from
// call to call. Why page-locked: a copy from pageable memory is staged by the driver and the call
// waits for it; from locked memory it is one DMA queued behind the stream's kernels, and the host
// goes on queueing work. The copies are recorded: before the host writes the buffer again, take()
// waits for the last of them to have run (in practice long past), so a refill never races a copy
// still in flight. For .cu files of this folder only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "engine/cuda/cuda_check.cuh"

namespace cherenkov::engine::cuda {

class HostStaging {
public:
    HostStaging() = default;
    ~HostStaging() {
        if (copied_ != nullptr) {
            cudaEventSynchronize(copied_);
            cudaEventDestroy(copied_);
        }
        if (data_ != nullptr) cudaFreeHost(data_);
    }
    HostStaging(const HostStaging&) = delete;
    HostStaging& operator=(const HostStaging&) = delete;

    // At least `bytes` of the buffer, free to write: after the copies queued out of it so far.
    void* take(size_t bytes) {
        if (copied_ != nullptr) CHERENKOV_CUDA_CHECK(cudaEventSynchronize(copied_));
        if (bytes > size_) {
            const size_t grown = std::max(bytes, 2 * size_);
            if (data_ != nullptr) CHERENKOV_CUDA_CHECK(cudaFreeHost(data_));
            data_ = nullptr;
            size_ = 0;
            CHERENKOV_CUDA_CHECK(cudaMallocHost(&data_, grown));
            size_ = grown;
        }
        return data_;
    }

    // Queues a copy of [offset, offset + bytes) of the buffer to `device` on `stream`; the buffer
    // is busy until the stream has run it.
    void copy_to_device(void* device, size_t offset, size_t bytes, cudaStream_t stream) {
        if (copied_ == nullptr) {
            CHERENKOV_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
        }
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(device, static_cast<char*>(data_) + offset, bytes,
                                             cudaMemcpyHostToDevice, stream));
        CHERENKOV_CUDA_CHECK(cudaEventRecord(copied_, stream));
    }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
    cudaEvent_t copied_ = nullptr;
};

}  // namespace cherenkov::engine::cuda
