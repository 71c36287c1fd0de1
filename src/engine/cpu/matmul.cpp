// Entry points of the CPU matmul: argument checks, the per-call group sums of x, the split of
// output rows over the pool, and the choice of kernel family (matmul_kernels.h).
#include "engine/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/thread_pool.h"

namespace cherenkov::engine {
namespace {

using matmul_detail::AffineCall;
using matmul_detail::F32Call;
using matmul_detail::kRowTile;
using matmul_detail::Q8Call;

// The override set by set_kernel_path (tests, benchmarks, and the engine's load for --tuning).
std::atomic<KernelPath> requested_path{KernelPath::Auto};

// A range of output rows handed to another thread should carry at least this many
// multiply-adds (~15-30 µs of work), so tiny matrices (gates, small experts at decode) run
// inline on the caller without waking a worker.
constexpr int64_t kMinMacsPerRange = int64_t{1} << 16;

// Whether the active family is AVX2 or AVX-512, which share every kernel but the int8 one and
// the float-activation affine one (matmul_avx512.cpp: the same bits).
bool vector_path() {
    return active_kernel_path() != KernelPath::Portable;
}

int64_t round_up(int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
}

bool valid_bits(int bits) {
    return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}

void check_call(int64_t rows, int64_t cols, size_t x_stride, int64_t n_rows, size_t y_stride,
                const float* x, const float* y) {
    if (rows < 0 || cols <= 0) {
        throw_invalid("[matmul] matrix shape [" + std::to_string(rows) + ", " +
                      std::to_string(cols) + "] is empty or negative");
    }
    if (n_rows < 0) throw_invalid("[matmul] n_rows " + std::to_string(n_rows) + " is negative");
    if (n_rows == 0 || rows == 0) return;
    if (x == nullptr || y == nullptr) throw_invalid("[matmul] x or y is null");
    if (n_rows > 1 && x_stride < static_cast<size_t>(cols)) {
        throw_invalid("[matmul] x_stride " + std::to_string(x_stride) + " < cols " +
                      std::to_string(cols));
    }
    if (n_rows > 1 && y_stride < static_cast<size_t>(rows)) {
        throw_invalid("[matmul] y_stride " + std::to_string(y_stride) + " < rows " +
                      std::to_string(rows));
    }
}

void check_affine(const AffineMatrix& w) {
    if (!valid_bits(w.bits)) {
        throw_unsupported("[matmul] " + std::to_string(w.bits) + "-bit affine weights");
    }
    if (w.group_size != 32 && w.group_size != 64 && w.group_size != 128) {
        throw_unsupported("[matmul] affine group size " + std::to_string(w.group_size) +
                          " (expected 32, 64 or 128)");
    }
    if (w.cols % w.group_size != 0) {
        throw_invalid("[matmul] cols " + std::to_string(w.cols) +
                      " is not a multiple of the group size " + std::to_string(w.group_size));
    }
    if (w.rows > 0 && (w.codes == nullptr || w.scales == nullptr || w.biases == nullptr)) {
        throw_invalid("[matmul] affine matrix without codes, scales or biases");
    }
}

// Row tiles per pool range, so that a range carries at least kMinMacsPerRange.
size_t tile_grain(int64_t cols, int64_t n_rows) {
    const int64_t macs_per_tile = kRowTile * cols * std::max<int64_t>(n_rows, 1);
    return static_cast<size_t>(
        std::max<int64_t>(1, (kMinMacsPerRange + macs_per_tile - 1) / macs_per_tile));
}

// Calls kernel(calls[i], row_begin, row_end) over every call's rows [0, calls[i].w->rows) in
// ranges of whole row tiles, the tiles of all calls in one pool operation (each range is cut
// where one matrix ends and the next begins).
template <typename Call>
void run_over_matrices(std::span<const Call> calls, int64_t cols, int64_t n_rows,
                       void (*kernel)(const Call&, int64_t, int64_t), ThreadPool* pool) {
    const auto row_tiles = [](const Call& call) {
        return static_cast<size_t>((call.w->rows + kRowTile - 1) / kRowTile);
    };
    size_t n_tiles = 0;
    for (const Call& call : calls) n_tiles += row_tiles(call);
    const size_t grain = tile_grain(cols, n_rows);
    const auto run_tiles = [&](size_t tile_begin, size_t tile_end) {
        size_t first = 0;  // the first tile of the current matrix
        for (const Call& call : calls) {
            const size_t tiles = row_tiles(call);
            const size_t begin = std::max(tile_begin, first);
            const size_t end = std::min(tile_end, first + tiles);
            if (begin < end) {
                kernel(call, static_cast<int64_t>(begin - first) * kRowTile,
                       std::min(call.w->rows, static_cast<int64_t>(end - first) * kRowTile));
            }
            first += tiles;
        }
    };
    if (pool == nullptr || pool->size() == 1 || n_tiles < 2 * grain) {
        run_tiles(0, n_tiles);
        return;
    }
    pool->parallel_for(n_tiles, grain, run_tiles);
}

// What one input becomes before the kernels read it: its group sums (F32) or its int8 codes with
// their steps and sums (Q8). Scratch of the calling thread (thread_local below), grown to the
// largest call: the hot path allocates only while it grows.
struct PreparedInput {
    std::vector<float> sums;
    std::vector<int8_t> codes;
    std::vector<float> steps;
    std::vector<float> code_sums;
};

// Group sums of x for the bias term, in the order matmul_kernels.h fixes: layout
// [groups, stride] with stride = n_rows rounded up to 8 and zero padding.
const float* x_group_sums(const float* x, size_t x_stride, int64_t n_rows, int64_t cols,
                          int group_size, PreparedInput& scratch, size_t* stride_out) {
    std::vector<float>& sums = scratch.sums;
    const int64_t n_groups = cols / group_size;
    const auto stride = static_cast<size_t>(round_up(n_rows, 8));
    if (sums.size() < static_cast<size_t>(n_groups) * stride) {
        sums.resize(static_cast<size_t>(n_groups) * stride);
    }
    for (int64_t group = 0; group < n_groups; ++group) {
        float* out = sums.data() + static_cast<size_t>(group) * stride;
        for (int64_t t = 0; t < n_rows; ++t) {
            const float* xg = x + static_cast<size_t>(t) * x_stride +
                              static_cast<size_t>(group) * static_cast<size_t>(group_size);
            float lanes[8] = {};
            for (int c8 = 0; c8 < group_size; c8 += 8) {
                for (int lane = 0; lane < 8; ++lane) lanes[lane] += xg[c8 + lane];
            }
            out[t] = matmul_detail::hsum8(lanes);
        }
        std::fill(out + n_rows, out + stride, 0.0F);
    }
    *stride_out = stride;
    return sums.data();
}

// Each input row's groups as int8 with one scale a group, laid out as Q8Call says. Rows are
// split over the pool when there are many.
void quantize_activations(const float* x, size_t x_stride, int64_t n_rows, int64_t cols,
                          int group_size, ThreadPool* pool, PreparedInput& scratch, Q8Call& call) {
    std::vector<int8_t>& quantized = scratch.codes;
    std::vector<float>& steps = scratch.steps;
    std::vector<float>& sums = scratch.code_sums;
    const int64_t n_groups = cols / group_size;
    quantized.resize(static_cast<size_t>(n_rows * cols));
    steps.resize(static_cast<size_t>(n_rows * n_groups));
    sums.resize(static_cast<size_t>(n_rows * n_groups));
    const auto kernel = vector_path() ? &matmul_detail::quantize_q8_rows_avx2
                                      : &matmul_detail::quantize_q8_rows_portable;
    int8_t* xq = quantized.data();
    float* dx = steps.data();
    float* qsum = sums.data();
    constexpr int64_t kRowsPerRange = 16;
    if (pool == nullptr || pool->size() == 1 || n_rows < 2 * kRowsPerRange) {
        kernel(x, x_stride, cols, group_size, 0, n_rows, xq, dx, qsum);
    } else {
        pool->parallel_for(static_cast<size_t>(n_rows), kRowsPerRange,
                           [&](size_t begin, size_t end) {
                               kernel(x, x_stride, cols, group_size, static_cast<int64_t>(begin),
                                      static_cast<int64_t>(end), xq, dx, qsum);
                           });
    }
    call.xq = xq;
    call.dx = dx;
    call.qsum = qsum;
}

template <int Bits>
void dequantize_row_bits(const AffineMatrix& w, int64_t row, float* out) {
    const uint8_t* codes = w.codes + static_cast<size_t>(row) * w.row_code_bytes();
    const int64_t n_groups = w.groups_per_row();
    constexpr uint32_t kMask = (1U << Bits) - 1;
    for (int64_t group = 0; group < n_groups; ++group) {
        const float scale = bf16_to_float(w.scales[row * n_groups + group]);
        const float bias = bf16_to_float(w.biases[row * n_groups + group]);
        for (int64_t c = group * w.group_size; c < (group + 1) * w.group_size; ++c) {
            const size_t bit = static_cast<size_t>(c) * Bits;
            uint32_t window = codes[bit / 8];
            if ((bit % 8) + Bits > 8) window |= uint32_t{codes[bit / 8 + 1]} << 8;
            const auto q = static_cast<float>((window >> (bit % 8)) & kMask);
            out[c] = scale * q + bias;
        }
    }
}

// One call per matrix: matrix i with the preparation of its input (inputs[i], an index into
// `prepared`) and its output, run over all their rows in one pool operation. Thread-local calls,
// like the preparations' scratch.
template <typename Call>
void run_per_matrix(std::span<const Call> prepared, std::span<const size_t> inputs,
                    std::span<const AffineMatrix* const> ws, std::span<float* const> ys,
                    std::span<const size_t> y_strides,
                    void (*kernel)(const Call&, int64_t, int64_t), ThreadPool* pool) {
    thread_local std::vector<Call> calls;
    calls.resize(ws.size());
    const int64_t n_rows = prepared[0].n_rows;
    for (size_t i = 0; i < ws.size(); ++i) {
        calls[i] = prepared[inputs[i]];
        calls[i].w = ws[i];
        calls[i].y = ys[i];
        calls[i].y_stride = n_rows > 1 ? y_strides[i] : static_cast<size_t>(ws[i]->rows);
    }
    run_over_matrices<Call>(std::span(calls.data(), ws.size()), ws[0]->cols, n_rows, kernel, pool);
}

// y_i = x_i · w_iᵀ for matrices of one width and layout (checked by the callers), matrix i
// reading input xs[i] (n_rows rows at x_stride): each distinct input prepared once, every
// matrix's row tiles in one pool operation.
void affine_matmul(std::span<const AffineMatrix* const> ws, std::span<const float* const> xs,
                   size_t x_stride, int64_t n_rows, std::span<float* const> ys,
                   std::span<const size_t> y_strides, ThreadPool* pool,
                   ActivationPrecision activations) {
    const AffineMatrix& first = *ws[0];
    const size_t stride = n_rows > 1 ? x_stride : static_cast<size_t>(first.cols);
    const KernelPath path = active_kernel_path();
    const bool avx2 = path != KernelPath::Portable;
    const bool q8 = activations == ActivationPrecision::Q8 && matmul_detail::q8_supported(first);
    // The distinct inputs in order of first use; inputs[i]: matrix i's.
    thread_local std::vector<const float*> distinct;
    thread_local std::vector<size_t> inputs;
    distinct.clear();
    inputs.resize(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
        const auto found = std::find(distinct.begin(), distinct.end(), xs[i]);
        inputs[i] = static_cast<size_t>(found - distinct.begin());
        if (found == distinct.end()) distinct.push_back(xs[i]);
    }
    thread_local std::vector<PreparedInput> scratch;
    if (scratch.size() < distinct.size()) scratch.resize(distinct.size());
    if (q8) {
        thread_local std::vector<Q8Call> prepared;
        prepared.resize(distinct.size());
        for (size_t j = 0; j < distinct.size(); ++j) {
            prepared[j] = Q8Call{};
            prepared[j].n_rows = n_rows;
            quantize_activations(distinct[j], stride, n_rows, first.cols, first.group_size, pool,
                                 scratch[j], prepared[j]);
        }
        const auto kernel = path == KernelPath::Avx512 ? &matmul_detail::affine_q8_rows_avx512
                            : avx2                     ? &matmul_detail::affine_q8_rows_avx2
                                                       : &matmul_detail::affine_q8_rows_portable;
        run_per_matrix<Q8Call>(prepared, inputs, ws, ys, y_strides, kernel, pool);
        return;
    }
    thread_local std::vector<AffineCall> prepared;
    prepared.resize(distinct.size());
    for (size_t j = 0; j < distinct.size(); ++j) {
        prepared[j] = AffineCall{};
        prepared[j].x = distinct[j];
        prepared[j].x_stride = stride;
        prepared[j].n_rows = n_rows;
        prepared[j].xsum = x_group_sums(distinct[j], stride, n_rows, first.cols, first.group_size,
                                        scratch[j], &prepared[j].xsum_stride);
    }
    const auto kernel = path == KernelPath::Avx512 ? &matmul_detail::affine_rows_avx512
                        : avx2                     ? &matmul_detail::affine_rows_avx2
                                                   : &matmul_detail::affine_rows_portable;
    run_per_matrix<AffineCall>(prepared, inputs, ws, ys, y_strides, kernel, pool);
}

// The checks of matmul_shared_input and matmul_each_input: as many inputs and outputs as
// matrices (at least one), one layout, valid shapes; each output's stride is its matrix's rows.
// y_strides: the caller's thread-local scratch.
void check_matrices(std::span<const AffineMatrix* const> ws, std::span<const float* const> xs,
                    size_t x_stride, int64_t n_rows, std::span<float* const> ys,
                    std::vector<size_t>& y_strides) {
    if (ws.empty() || ws.size() != ys.size() || ws.size() != xs.size()) {
        throw_invalid("[matmul] " + std::to_string(ws.size()) + " matrices, " +
                      std::to_string(xs.size()) + " inputs and " + std::to_string(ys.size()) +
                      " outputs (at least one, as many of each)");
    }
    y_strides.resize(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
        const AffineMatrix& w = *ws[i];
        check_affine(w);
        if (!same_input_layout(w, *ws[0])) {
            throw_invalid("[matmul] matrices of one call differ in width, bits or group size");
        }
        y_strides[i] = static_cast<size_t>(w.rows);
        check_call(w.rows, w.cols, x_stride, n_rows, y_strides[i], xs[i], ys[i]);
    }
}

}  // namespace

const char* activation_precision_name(ActivationPrecision activations) {
    return activations == ActivationPrecision::Q8 ? "q8" : "f32";
}

ActivationPrecision parse_activation_precision(std::string_view text, std::string_view what) {
    if (text == "f32") return ActivationPrecision::F32;
    if (text == "q8") return ActivationPrecision::Q8;
    throw_invalid(std::string(what) + ": '" + std::string(text) + "' is not f32 or q8");
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

const char* kernel_path_name(KernelPath path) {
    switch (path) {
        case KernelPath::Auto: return "auto";
        case KernelPath::Portable: return "portable";
        case KernelPath::Avx2: return "avx2";
        case KernelPath::Avx512: return "avx512";
    }
    return "auto";
}

void set_kernel_path(KernelPath path) {
    if (path == KernelPath::Avx2 && !cpu_has_avx2_fma()) {
        throw_unsupported("[matmul] this CPU has no AVX2/FMA");
    }
    if (path == KernelPath::Avx512 && !cpu_has_avx512_vnni()) {
        throw_unsupported("[matmul] this CPU has no AVX-512 VNNI");
    }
    requested_path.store(path, std::memory_order_relaxed);
}

KernelPath active_kernel_path() {
    const KernelPath path = requested_path.load(std::memory_order_relaxed);
    if (path != KernelPath::Auto) return path;
    // Every matmul call asks: the CPU's features are looked up once.
    static const KernelPath best = cpu_has_avx512_vnni() ? KernelPath::Avx512
                                   : cpu_has_avx2_fma()  ? KernelPath::Avx2
                                                         : KernelPath::Portable;
    return best;
}

void matmul(const AffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool, ActivationPrecision activations) {
    check_affine(w);
    check_call(w.rows, w.cols, x_stride, n_rows, y_stride, x, y);
    if (n_rows == 0 || w.rows == 0) return;
    const AffineMatrix* const ws[] = {&w};
    const float* const xs[] = {x};
    float* const ys[] = {y};
    const size_t y_strides[] = {y_stride};
    affine_matmul(ws, xs, x_stride, n_rows, ys, y_strides, pool, activations);
}

bool same_input_layout(const AffineMatrix& a, const AffineMatrix& b) {
    return a.cols == b.cols && a.bits == b.bits && a.group_size == b.group_size;
}

void matmul_shared_input(std::span<const AffineMatrix* const> ws, const float* x, size_t x_stride,
                         int64_t n_rows, std::span<float* const> ys, ThreadPool* pool,
                         ActivationPrecision activations) {
    thread_local std::vector<const float*> xs;
    xs.assign(ws.size(), x);
    thread_local std::vector<size_t> y_strides;
    check_matrices(ws, xs, x_stride, n_rows, ys, y_strides);
    if (n_rows == 0) return;
    affine_matmul(ws, xs, x_stride, n_rows, ys, y_strides, pool, activations);
}

void matmul_each_input(std::span<const AffineMatrix* const> ws, std::span<const float* const> xs,
                       int64_t n_rows, std::span<float* const> ys, ThreadPool* pool,
                       ActivationPrecision activations) {
    // Contiguous rows: the stride is the width (checked against every matrix's).
    const auto x_stride = static_cast<size_t>(ws.empty() ? 0 : ws[0]->cols);
    thread_local std::vector<size_t> y_strides;
    check_matrices(ws, xs, x_stride, n_rows, ys, y_strides);
    if (n_rows == 0) return;
    affine_matmul(ws, xs, x_stride, n_rows, ys, y_strides, pool, activations);
}

void matmul(const F32Matrix& w, const float* x, size_t x_stride, int64_t n_rows, float* y,
            size_t y_stride, ThreadPool* pool) {
    check_call(w.rows, w.cols, x_stride, n_rows, y_stride, x, y);
    if (n_rows == 0 || w.rows == 0) return;
    if (w.data == nullptr) throw_invalid("[matmul] F32 matrix without data");

    F32Call call;
    call.w = &w;
    call.x = x;
    call.x_stride = n_rows > 1 ? x_stride : static_cast<size_t>(w.cols);
    call.n_rows = n_rows;
    call.y = y;
    call.y_stride = n_rows > 1 ? y_stride : static_cast<size_t>(w.rows);
    const auto kernel =
        vector_path() ? &matmul_detail::f32_rows_avx2 : &matmul_detail::f32_rows_portable;
    run_over_matrices<F32Call>(std::span(&call, 1), w.cols, n_rows, kernel, pool);
}

void dequantize_row(const AffineMatrix& w, int64_t row, float* out) {
    check_affine(w);
    if (row < 0 || row >= w.rows) {
        throw_invalid("[dequantize_row] row " + std::to_string(row) + " outside [0, " +
                      std::to_string(w.rows) + ")");
    }
    switch (w.bits) {
        case 2: return dequantize_row_bits<2>(w, row, out);
        case 3: return dequantize_row_bits<3>(w, row, out);
        case 4: return dequantize_row_bits<4>(w, row, out);
        case 5: return dequantize_row_bits<5>(w, row, out);
        case 6: return dequantize_row_bits<6>(w, row, out);
        case 8: return dequantize_row_bits<8>(w, row, out);
        default: throw_internal("[dequantize_row] unchecked bit width");
    }
}

}  // namespace cherenkov::engine
