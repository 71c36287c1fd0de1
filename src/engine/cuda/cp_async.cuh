// Asynchronous global → shared copies (cp.async, sm_80+) for the kernels that stage weights in
// shared memory: 16-byte copies with an L2 evict-first hint, commit groups, and a span copy for
// arrays that are not 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cherenkov::engine::cuda {

// Weights are read once per call: evict-first keeps them from pushing x out of L2.
__device__ __forceinline__ uint64_t evict_first_policy() {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// 16 bytes from global to shared memory without passing through registers.
__device__ __forceinline__ void copy_16(uint8_t* dst, const void* src, uint64_t policy) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(src), "l"(policy)
                 : "memory");
}

// 4 bytes from global to shared memory (cached in L1: small gathered values).
__device__ __forceinline__ void copy_4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(src)
                 : "memory");
}

// 16 bytes from global to shared memory with the default L2 policy (data read again by other
// blocks).
__device__ __forceinline__ void copy_16_kept(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(src)
                 : "memory");
}

__device__ __forceinline__ void commit_copies() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most `Pending` of this thread's committed copy groups are still in flight.
template <int Pending>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

// Copies `elements` uint16 from `begin` into dst, widened to the 16-byte blocks around them (the
// widened bytes share 16-byte blocks with real elements, so they are mapped memory), thread
// `thread` of `threads` taking every threads-th block. Returns the element offset of begin in dst.
__device__ __forceinline__ int copy_span(uint8_t* dst, const uint16_t* begin, size_t elements,
                                         int thread, int threads, uint64_t policy) {
    const auto first = reinterpret_cast<uintptr_t>(begin) & ~uintptr_t{15};
    const uintptr_t end = reinterpret_cast<uintptr_t>(begin + elements);
    const int blocks = static_cast<int>((((end + 15) & ~uintptr_t{15}) - first) / 16);
    for (int i = thread; i < blocks; i += threads) {
        copy_16(dst + 16 * i, reinterpret_cast<const void*>(first + 16 * i), policy);
    }
    return static_cast<int>((reinterpret_cast<uintptr_t>(begin) - first) / 2);
}

// n ÷ d for 0 ≤ n < 2^22, given inv_d = 1/d in float: (n + ½)/d lies at least ½/d from an
// integer and the float product is within 2^-23 relative of it, so truncation is exact. Two
// float instructions instead of an integer division's dozen and more.
__device__ __forceinline__ int quotient(int n, float inv_d) {
    return static_cast<int>((static_cast<float>(n) + 0.5F) * inv_d);
}

}  // namespace cherenkov::engine::cuda
