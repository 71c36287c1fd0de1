// Portable matmul kernels: plain loops in the order matmul_kernels.h fixes (8 lanes the compiler
// may vectorize, products and sums rounded separately). They run where AVX2/FMA is missing and
// are what the vector kernels are tested against.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/matmul_kernels.h"

namespace cherenkov::engine::matmul_detail {
namespace {

static_assert(std::endian::native == std::endian::little, "code streams are little-endian");

constexpr int64_t kWeightBlock = 8;  // weight rows decoded together
constexpr int64_t kInputBlock = 64;  // input rows sharing one decoded block
constexpr int64_t kColBlock = 256;   // columns per decoded block (a multiple of 128)

// out[k] = scale · code(8·piece + k) for k < 8 (8 codes take exactly Bits bytes). Unrolled so
// the shifts are constants; codes go through int32 (they are < 256) for a plain conversion.
template <int Bits>
inline void decode8(const uint8_t* codes, int64_t piece, float scale, float* out) {
    // Byte by byte (the compiler merges the loads): a Bits-byte memcpy into a uint64 would go
    // through the stack and stall on store forwarding.
    const uint8_t* bytes = codes + piece * Bits;
    uint64_t window = 0;
#pragma GCC unroll 8
    for (int byte = 0; byte < Bits; ++byte) window |= uint64_t{bytes[byte]} << (8 * byte);
    constexpr uint64_t kMask = (uint64_t{1} << Bits) - 1;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        out[k] = static_cast<float>(static_cast<int32_t>((window >> (k * Bits)) & kMask)) * scale;
    }
}

// wq[r · kColBlock + k] = scale · q for weight rows row0 .. row0+n_w-1, columns k0 .. k0+n_k-1.
template <int Bits>
void decode_block(const AffineMatrix& w, int64_t row0, int64_t n_w, int64_t k0, int64_t n_k,
                  float* wq) {
    const int64_t n_groups = w.groups_per_row();
    for (int64_t r = 0; r < n_w; ++r) {
        const uint8_t* codes = w.codes + static_cast<size_t>(row0 + r) * w.row_code_bytes();
        for (int64_t c0 = k0; c0 < k0 + n_k; c0 += w.group_size) {
            const float scale = bf16_to_float(w.scales[(row0 + r) * n_groups + c0 / w.group_size]);
            for (int64_t c8 = c0; c8 < c0 + w.group_size; c8 += 8) {
                decode8<Bits>(codes, c8 / 8, scale, wq + r * kColBlock + (c8 - k0));
            }
        }
    }
}

template <int Bits>
void affine_rows_bits(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    alignas(32) float wq[kWeightBlock * kColBlock];
    alignas(32) float acc[kInputBlock][kWeightBlock][8];  // lanes per (input row, weight row)

    for (int64_t row0 = row_begin; row0 < row_end; row0 += kWeightBlock) {
        const int64_t n_w = std::min(kWeightBlock, row_end - row0);
        for (int64_t t0 = 0; t0 < call.n_rows; t0 += kInputBlock) {
            const int64_t n_t = std::min(kInputBlock, call.n_rows - t0);
            std::fill(&acc[0][0][0], &acc[0][0][0] + n_t * kWeightBlock * 8, 0.0F);
            for (int64_t k0 = 0; k0 < w.cols; k0 += kColBlock) {
                const int64_t n_k = std::min(kColBlock, w.cols - k0);
                decode_block<Bits>(w, row0, n_w, k0, n_k, wq);
                for (int64_t t = 0; t < n_t; ++t) {
                    const float* xr = call.x + static_cast<size_t>(t0 + t) * call.x_stride + k0;
                    for (int64_t r = 0; r < n_w; ++r) {
                        // A local copy of the lanes: it cannot alias wq or x, so the compiler
                        // keeps it in registers.
                        float lanes[8];
                        std::memcpy(lanes, acc[t][r], sizeof(lanes));
                        const float* wr = wq + r * kColBlock;
                        for (int64_t c8 = 0; c8 < n_k; c8 += 8) {
                            for (int lane = 0; lane < 8; ++lane) {
                                lanes[lane] += wr[c8 + lane] * xr[c8 + lane];
                            }
                        }
                        std::memcpy(acc[t][r], lanes, sizeof(lanes));
                    }
                }
            }
            for (int64_t r = 0; r < n_w; ++r) {
                const uint16_t* biases = w.biases + (row0 + r) * n_groups;
                for (int64_t t = 0; t < n_t; ++t) {
                    float bsum = 0.0F;
                    for (int64_t group = 0; group < n_groups; ++group) {
                        const float xs = call.xsum[static_cast<size_t>(group) * call.xsum_stride +
                                                   static_cast<size_t>(t0 + t)];
                        bsum += bf16_to_float(biases[group]) * xs;
                    }
                    call.y[static_cast<size_t>(t0 + t) * call.y_stride +
                           static_cast<size_t>(row0 + r)] = hsum8(acc[t][r]) + bsum;
                }
            }
        }
    }
}

// v rounded to the nearest integer (ties to even) when |v| ≤ 2^22: adding and subtracting
// 1.5·2^23 leaves no fraction bits (plain float arithmetic: no libm call, and vectorizable).
inline float round_to_integer(float v) {
    constexpr float kShift = 12582912.0F;
    return (v + kShift) - kShift;
}

// One input row against one 4-bit weight row with int8 activations (matmul_kernels.h).
float q8_dot(const Q8Call& call, int64_t t, int64_t row) {
    const AffineMatrix& w = *call.w;
    const int64_t n_groups = w.groups_per_row();
    const uint8_t* codes = w.codes + static_cast<size_t>(row) * w.row_code_bytes();
    const int8_t* xq = call.xq + static_cast<size_t>(t) * static_cast<size_t>(w.cols);
    const float* dx = call.dx + static_cast<size_t>(t) * static_cast<size_t>(n_groups);
    float acc[8] = {};
    float bsum = 0.0F;
    for (int64_t group = 0; group < n_groups; ++group) {
        int32_t isum[8] = {};
        for (int64_t block = 0; block < w.group_size / 64; ++block) {
            const int64_t c0 = group * w.group_size + block * 64;
            const uint8_t* bytes = codes + c0 / 2;
            const int8_t* even = xq + c0;
            const int8_t* odd = even + 32;
            for (int j = 0; j < 32; ++j) {
                // Byte j holds columns 2j (low nibble) and 2j + 1 (high nibble): lane j / 4.
                isum[j / 4] += (bytes[j] & 15) * even[j] + (bytes[j] >> 4) * odd[j];
            }
        }
        const float scale = bf16_to_float(w.scales[row * n_groups + group]) * dx[group];
        for (int lane = 0; lane < 8; ++lane) {
            acc[lane] = std::fma(static_cast<float>(isum[lane]), scale, acc[lane]);
        }
        bsum = std::fma(bf16_to_float(w.biases[row * n_groups + group]),
                        call.qsum[t * n_groups + group], bsum);
    }
    return hsum8(acc) + bsum;
}

}  // namespace

void quantize_q8_rows_portable(const float* x, size_t x_stride, int64_t cols, int group_size,
                               int64_t row_begin, int64_t row_end, int8_t* xq, float* dx,
                               float* qsum) {
    const int64_t n_groups = cols / group_size;
    for (int64_t t = row_begin; t < row_end; ++t) {
        const float* xr = x + static_cast<size_t>(t) * x_stride;
        int8_t* out = xq + static_cast<size_t>(t * cols);
        for (int64_t group = 0; group < n_groups; ++group) {
            const int64_t c0 = group * group_size;
            float amax = 0.0F;
            for (int64_t c = c0; c < c0 + group_size; ++c) {
                const float magnitude = std::fabs(xr[c]);
                amax = magnitude > amax ? magnitude : amax;
            }
            const float inverse = amax > 0.0F ? 127.0F / amax : 0.0F;
            dx[t * n_groups + group] = amax / 127.0F;
            int32_t total = 0;
            for (int64_t block = c0; block < c0 + group_size; block += 64) {
                for (int64_t k = 0; k < 32; ++k) {
                    out[block + k] =
                        static_cast<int8_t>(round_to_integer(xr[block + 2 * k] * inverse));
                    out[block + 32 + k] =
                        static_cast<int8_t>(round_to_integer(xr[block + 2 * k + 1] * inverse));
                    total += out[block + k] + out[block + 32 + k];
                }
            }
            qsum[t * n_groups + group] = dx[t * n_groups + group] * static_cast<float>(total);
        }
    }
}

void affine_q8_rows_portable(const Q8Call& call, int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
        for (int64_t t = 0; t < call.n_rows; ++t) {
            call.y[static_cast<size_t>(t) * call.y_stride + static_cast<size_t>(row)] =
                q8_dot(call, t, row);
        }
    }
}

void affine_rows_portable(const AffineCall& call, int64_t row_begin, int64_t row_end) {
    switch (call.w->bits) {
        case 2: return affine_rows_bits<2>(call, row_begin, row_end);
        case 3: return affine_rows_bits<3>(call, row_begin, row_end);
        case 4: return affine_rows_bits<4>(call, row_begin, row_end);
        case 5: return affine_rows_bits<5>(call, row_begin, row_end);
        case 6: return affine_rows_bits<6>(call, row_begin, row_end);
        case 8: return affine_rows_bits<8>(call, row_begin, row_end);
        default: throw_internal("[matmul] unchecked bit width");
    }
}

void f32_rows_portable(const F32Call& call, int64_t row_begin, int64_t row_end) {
    const F32Matrix& w = *call.w;
    const int64_t cols8 = w.cols / 8 * 8;
    for (int64_t row = row_begin; row < row_end; ++row) {
        const float* wr = w.data + static_cast<size_t>(row) * static_cast<size_t>(w.cols);
        for (int64_t t = 0; t < call.n_rows; ++t) {
            const float* xr = call.x + static_cast<size_t>(t) * call.x_stride;
            float lanes[8] = {};
            for (int64_t c8 = 0; c8 < cols8; c8 += 8) {
                for (int lane = 0; lane < 8; ++lane) lanes[lane] += wr[c8 + lane] * xr[c8 + lane];
            }
            float sum = hsum8(lanes);
            for (int64_t c = cols8; c < w.cols; ++c) sum += wr[c] * xr[c];
            call.y[static_cast<size_t>(t) * call.y_stride + static_cast<size_t>(row)] = sum;
        }
    }
}

}  // namespace cherenkov::engine::matmul_detail
