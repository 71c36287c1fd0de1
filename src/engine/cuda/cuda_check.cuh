// CHERENKOV_CUDA_CHECK(call): throws Internal with the call's text and the runtime's message when
// a CUDA runtime call fails (docs/style.md 2.4). For .cu files of this folder only.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/error.h"

#define CHERENKOV_CUDA_CHECK(call)                                              \
    do {                                                                        \
        const cudaError_t cherenkov_status_ = (call);                           \
        if (cherenkov_status_ != cudaSuccess) {                                 \
            ::cherenkov::throw_internal(std::string(#call) + ": " +             \
                                        cudaGetErrorString(cherenkov_status_)); \
        }                                                                       \
    } while (0)
