// Portable reference kernels (the vectorized paths land separately under the same interface).
#include "engine/cpu/matmul.h"

#include <vector>

#include "base/half.h"
#include "engine/cpu/thread_pool.h"

namespace cherenkov::engine {

namespace {

inline uint32_t code_at(const uint8_t* row, int bits, int64_t k) {
    const uint64_t bit = static_cast<uint64_t>(k) * static_cast<uint64_t>(bits);
    const uint64_t byte = bit / 8;
    const unsigned shift = bit % 8;
    uint32_t v = row[byte];
    if (shift + static_cast<unsigned>(bits) > 8) v |= static_cast<uint32_t>(row[byte + 1]) << 8;
    return (v >> shift) & ((1U << bits) - 1U);
}

}  // namespace

void dequantize_row(const AffineMatrix& w, int64_t row, float* out) {
    const uint8_t* codes = w.codes + static_cast<size_t>(row) * w.row_code_bytes();
    const int64_t groups = w.groups_per_row();
    for (int64_t g = 0; g < groups; ++g) {
        const float scale = bf16_to_float(w.scales[row * groups + g]);
        const float bias = bf16_to_float(w.biases[row * groups + g]);
        for (int64_t i = 0; i < w.group_size; ++i) {
            const int64_t k = g * w.group_size + i;
            out[k] = scale * static_cast<float>(code_at(codes, w.bits, k)) + bias;
        }
    }
}

void matmul(const AffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool) {
    pool->parallel_for(static_cast<size_t>(w.rows), 16, [&](size_t begin, size_t end) {
        std::vector<float> row(static_cast<size_t>(w.cols));
        for (size_t r = begin; r < end; ++r) {
            dequantize_row(w, static_cast<int64_t>(r), row.data());
            for (int64_t t = 0; t < n_rows; ++t) {
                const float* xt = x + static_cast<size_t>(t) * x_stride;
                float sum = 0.0F;
                for (int64_t c = 0; c < w.cols; ++c) sum += row[static_cast<size_t>(c)] * xt[c];
                y[static_cast<size_t>(t) * y_stride + r] = sum;
            }
        }
    });
}

void matmul(const F32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool) {
    pool->parallel_for(static_cast<size_t>(w.rows), 16, [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
            const float* wr = w.data + r * static_cast<size_t>(w.cols);
            for (int64_t t = 0; t < n_rows; ++t) {
                const float* xt = x + static_cast<size_t>(t) * x_stride;
                float sum = 0.0F;
                for (int64_t c = 0; c < w.cols; ++c) sum += wr[c] * xt[c];
                y[static_cast<size_t>(t) * y_stride + r] = sum;
            }
        }
    });
}

void set_kernel_path(KernelPath /*path*/) {}
KernelPath active_kernel_path() { return KernelPath::Portable; }
bool cpu_has_avx2_fma() { return false; }

}  // namespace cherenkov::engine
