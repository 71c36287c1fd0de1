// Programmatic dependent launch (sm_90): a kernel launched with launch_dependent() may start while
// the previous kernel in its stream is still running, once every block of that kernel has called
// allow_next_kernel() (or exited). Its blocks must call wait_for_previous_kernel() before they
// read anything the previous kernel wrote or write anything it reads; what comes before the wait
// (shared-memory setup, loads of weights that never change) overlaps the previous kernel's tail.
// On older devices the launch is an ordinary one and both calls compile to nothing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/kernel_policy.h"

namespace cherenkov::engine::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_kernel() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launch overlap for the calls of one thread, set per forward call: on for decode-sized calls
// (latency-bound kernels; H200, 4-layer store: +8% decode tokens/s), off for prefill calls, which
// ran 20% slower with it (many more launches per call; the attribute costs the launch path more
// than the overlap gains there). On outside any scope.
class LaunchOverlapScope {
public:
    explicit LaunchOverlapScope(bool on) : previous_(state()) { state() = on; }
    ~LaunchOverlapScope() { state() = previous_; }
    LaunchOverlapScope(const LaunchOverlapScope&) = delete;
    LaunchOverlapScope& operator=(const LaunchOverlapScope&) = delete;

    static bool on() { return state(); }

private:
    static bool& state() {
        static thread_local bool on = true;
        return on;
    }
    bool previous_;
};

// launch_dependent with thread block clusters of `cluster` blocks (sm_90; every grid dimension a
// multiple of the cluster's). A cluster of one block is an ordinary launch_dependent.
template <typename... KernelArgs, typename... Args>
void launch_dependent_in_clusters(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                  dim3 cluster, size_t shared_bytes, cudaStream_t stream,
                                  Args&&... args) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cudaLaunchAttribute attributes[2]{};
    unsigned n = 0;
    // The device takes the programmatic-serialization attribute (sm_90) and the tuning leaves
    // it on (launch_overlap=off: the waits then return at once).
    if (kernel_policy().launch_overlap && LaunchOverlapScope::on()) {
        attributes[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attributes[n].val.programmaticStreamSerializationAllowed = 1;
        ++n;
    }
    if (cluster.x * cluster.y * cluster.z > 1) {
        attributes[n].id = cudaLaunchAttributeClusterDimension;
        attributes[n].val.clusterDim.x = cluster.x;
        attributes[n].val.clusterDim.y = cluster.y;
        attributes[n].val.clusterDim.z = cluster.z;
        ++n;
    }
    config.attrs = attributes;
    config.numAttrs = n;
    CHERENKOV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_dependent(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes,
                      cudaStream_t stream, Args&&... args) {
    launch_dependent_in_clusters(kernel, grid, block, dim3(1, 1, 1), shared_bytes, stream,
                                 std::forward<Args>(args)...);
}

}  // namespace cherenkov::engine::cuda
