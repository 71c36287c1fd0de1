// A read-only view of one MLX-affine quantized matrix [rows, cols] (docs/formats.md
// §2): per row, `cols·bits/8` code bytes (the row's little-endian bit stream), and per group of
// `group_size` columns one BF16 scale and one BF16 bias; w = scale·q + bias. The bytes belong to
// whoever made the view (a mapped dense.bin, an expert slot); the view never owns them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cherenkov::engine {

struct AffineMatrix {
    int64_t rows = 0;
    int64_t cols = 0;
    int bits = 4;  // 2, 3, 4, 5, 6 or 8
    int group_size = 64;
    const uint8_t* codes = nullptr;    // [rows, cols·bits/8]
    const uint16_t* scales = nullptr;  // BF16 [rows, cols/group_size]
    const uint16_t* biases = nullptr;  // BF16 [rows, cols/group_size]

    size_t row_code_bytes() const { return static_cast<size_t>(cols) * bits / 8; }
    int64_t groups_per_row() const { return cols / group_size; }
};

// A float32 matrix [rows, cols], row-major (routers, unquantized weights).
struct F32Matrix {
    int64_t rows = 0;
    int64_t cols = 0;
    const float* data = nullptr;
};

}  // namespace cherenkov::engine
