// The linear-algebra layer of the CUDA forward pass (device_layers.cuh): linear_apply and
// affine_matmul route each product to the decode GEMV (affine_gemv.h, 1-4 rows) or the tiled
// prefill GEMM (affine_gemm.h), then add the bias. No kernel of its own but the bias add, which
// waits for the previous kernel and is launched with launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/cuda/affine_gemm.h"
#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"

namespace cherenkov::engine::cuda {
namespace {

// y[t, r] += bias[r]; y: [n_rows, n_out] contiguous.
__global__ void add_bias_kernel(float* y, const float* bias, int64_t n_rows, int64_t n_out) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t n = n_rows * n_out;
    for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < n;
         index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        y[index] += bias[index % n_out];
    }
}

bool aligned(const void* pointer, size_t alignment) {
    return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

}  // namespace

// Few rows go through the GEMV in chunks of kMaxGemvRows when the tiled GEMM could not fill the
// GPU: its grid is ⌈out/128⌉ × ⌈T/32⌉ blocks, so a [2560, 640] expert matrix at 8-64 rows gets
// 20-40 blocks on a 132-SM H200 (measured: 8 rows took ~200 µs as one GEMM against ~10 µs as two
// GEMV launches). Each GEMV chunk reads the weights again, so this stops at kMaxChunkedGemvRows
// and at GEMM grids of two waves or more. Prefill's routed experts mostly see a few rows each.
constexpr int64_t kMaxChunkedGemvRows = 64;
constexpr int64_t kGemmRowsPerBlock = 128;
constexpr int64_t kGemmMinTokensPerBlock = 32;
constexpr int64_t kGemmBlocksToFill = 2 * 132;

bool prefer_chunked_gemv(int64_t out_rows, int64_t n_rows) {
    if (n_rows <= kMaxGemvRows) return true;
    if (n_rows > kMaxChunkedGemvRows) return false;
    const int64_t blocks = (out_rows + kGemmRowsPerBlock - 1) / kGemmRowsPerBlock *
                           ((n_rows + kGemmMinTokensPerBlock - 1) / kGemmMinTokensPerBlock);
    return blocks < kGemmBlocksToFill;
}

void affine_matmul(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows,
                   float* y, size_t y_stride, cudaStream_t stream) {
    if (n_rows < 0) throw_invalid("[affine_matmul] n_rows " + std::to_string(n_rows));
    if (n_rows == 0) return;
    // The GEMV wants 16-byte x rows (every chunk's first row too: strides a multiple of 4
    // floats); anything it cannot take goes to the GEMM, which takes all.
    const bool gemv_fits = prefer_chunked_gemv(w.rows, n_rows) &&
                           affine_gemv_supports(w.bits, w.group_size) && aligned(x, 16) &&
                           (n_rows == 1 || x_stride % 4 == 0) && aligned(w.codes, 16);
    if (gemv_fits) {
        for (int64_t first = 0; first < n_rows; first += kMaxGemvRows) {
            const int64_t n = std::min<int64_t>(kMaxGemvRows, n_rows - first);
            const size_t gemv_stride = n == 1 ? 0 : x_stride;  // 1 row: stride unused
            affine_gemv(w, x + static_cast<size_t>(first) * x_stride, gemv_stride,
                        static_cast<int>(n), y + static_cast<size_t>(first) * y_stride, y_stride,
                        stream);
        }
        return;
    }
    affine_gemm(w, x, x_stride, n_rows, y, y_stride, stream);
}

void linear_apply(const DeviceLinear& linear, const float* x, int64_t n_rows, float* y,
                  cudaStream_t stream) {
    if (n_rows < 0) throw_invalid("[linear_apply] n_rows " + std::to_string(n_rows));
    if (n_rows == 0) return;
    const int64_t in = linear.in_features();
    const int64_t out = linear.out_features();
    if (linear.quantized) {
        if (linear.affine.rows != out || linear.affine.cols != in) {
            throw_internal("[linear_apply] DeviceLinear shape [" + std::to_string(out) + ", " +
                           std::to_string(in) + "] differs from its affine matrix's");
        }
        affine_matmul(linear.affine, x, static_cast<size_t>(in), n_rows, y,
                      static_cast<size_t>(out), stream);
    } else {
        // Few rows: the GEMV path per chunk (see kMaxChunkedGemvRows).
        const int64_t chunk = prefer_chunked_gemv(out, n_rows) ? kMaxGemvRows : n_rows;
        for (int64_t first = 0; first < n_rows; first += chunk) {
            f32_matmul(DeviceF32Matrix{out, in, linear.dense}, x + first * in,
                       static_cast<size_t>(in), std::min(chunk, n_rows - first), y + first * out,
                       static_cast<size_t>(out), stream);
        }
    }
    if (linear.bias == nullptr) return;
    const int64_t n = n_rows * out;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
    launch_dependent(add_bias_kernel, dim3(blocks), dim3(256), 0, stream, y, linear.bias, n_rows,
                     out);
}

}  // namespace cherenkov::engine::cuda
