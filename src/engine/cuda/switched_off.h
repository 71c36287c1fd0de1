// Environment switches for A/B runs of the CUDA fast paths (CHERENKOV_CUDA_GRAPHS,
// CHERENKOV_CUDA_STREAMS, CHERENKOV_GEMV_MMA, CHERENKOV_GEMV_BULK, CHERENKOV_PDL): the variable
// set to "0" turns the path off; unset or any other value leaves it on.
#pragma once

#include <cstdlib>
#include <cstring>

namespace cherenkov::engine::cuda {

inline bool switched_off(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && std::strcmp(value, "0") == 0;
}

}  // namespace cherenkov::engine::cuda
