// Software prefetch for the streaming (decode) matmul kernels. A thread's share of a matrix is
// a run of whole rows, read a tile of rows at a time column by column: several short strides at
// once, which the hardware prefetchers pick up late at every tile. Asking for the same cache
// line of the next tile's rows while this tile reads its own keeps about one tile (a few KB) in
// flight per thread: on one thread of the 2-core AMD machine the one-row int8 kernel went from
// 7.4 to 11.1 GB/s of weights (memcpy: 9.1). A prefetch never faults, so the last tile may ask
// past its matrix.
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace cherenkov::engine::matmul_detail {

inline void prefetch_next_tile(const uint8_t* at, size_t tile_bytes) {
    _mm_prefetch(reinterpret_cast<const char*>(at + tile_bytes), _MM_HINT_T0);
}

}  // namespace cherenkov::engine::matmul_detail
