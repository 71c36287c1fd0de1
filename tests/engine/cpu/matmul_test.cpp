// CPU matmul kernels against a naive reference that dequantizes with model_data's MLX affine
// code (docs/formats.md §2), for every bit width and group size, both kernel families, odd shapes
// and strides; plus the order guarantees: bitwise the same for any thread count and any batch.
#include "engine/cpu/matmul.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/thread_pool.h"
#include "model_data/encodings/mlx_affine.h"

namespace cherenkov::engine {
namespace {

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kGroupSizes[] = {32, 64, 128};

// A random MLX-quantized matrix (quantized with quantize_mlx_row, parameters stored as BF16)
// and its dequantized float copy.
struct QuantizedMatrix {
    std::vector<uint8_t> codes;
    std::vector<uint16_t> scales;
    std::vector<uint16_t> biases;
    std::vector<float> dense;  // [rows, cols], dequantized with dequantize_mlx_row
    AffineMatrix view;
};

QuantizedMatrix make_matrix(int64_t rows, int64_t cols, int bits, int group_size, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0F, 1.0F);
    QuantizedMatrix m;
    const int64_t n_groups = cols / group_size;
    const size_t row_bytes = model_data::mlx_packed_bytes(static_cast<size_t>(cols), bits);
    m.dense.resize(static_cast<size_t>(rows * cols));
    for (int64_t row = 0; row < rows; ++row) {
        std::vector<float> values(static_cast<size_t>(cols));
        // Some rows offset so groups get one-signed values and both signs of scale.
        const float offset = row % 3 == 0 ? 1.5F : 0.0F;
        for (float& value : values) value = normal(rng) * 0.05F + offset;
        const model_data::QuantizedRow q =
            model_data::quantize_mlx_row(values, bits, group_size, model_data::MlxRounding::Gpu);
        m.codes.insert(m.codes.end(), q.codes.begin(), q.codes.end());
        std::vector<float> scales(static_cast<size_t>(n_groups));
        std::vector<float> biases(static_cast<size_t>(n_groups));
        for (int64_t group = 0; group < n_groups; ++group) {
            m.scales.push_back(float_to_bf16(q.scales[static_cast<size_t>(group)]));
            m.biases.push_back(float_to_bf16(q.biases[static_cast<size_t>(group)]));
            scales[static_cast<size_t>(group)] = bf16_to_float(m.scales.back());
            biases[static_cast<size_t>(group)] = bf16_to_float(m.biases.back());
        }
        model_data::dequantize_mlx_row(
            q.codes, scales, biases, bits, group_size,
            std::span<float>(m.dense.data() + row * cols, static_cast<size_t>(cols)));
        EXPECT_EQ(q.codes.size(), row_bytes);
    }
    m.view = AffineMatrix{rows,           cols, bits, group_size, m.codes.data(), m.scales.data(),
                          m.biases.data()};
    return m;
}

std::vector<float> random_vector(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<float> values(n);
    for (float& value : values) value = uniform(rng);
    return values;
}

// Checks y against Σ w·x in double, with a bound proportional to Σ |terms| (float rounding of
// cols products and sums; an indexing bug is off by O(1) of that).
void expect_matches_reference(const std::vector<float>& dense, const QuantizedMatrix* quantized,
                              int64_t rows, int64_t cols, const std::vector<float>& x,
                              size_t x_stride, int64_t n_rows, const std::vector<float>& y,
                              size_t y_stride, const std::string& what) {
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t row = 0; row < rows; ++row) {
            double sum = 0.0;
            double magnitude = 0.0;
            for (int64_t c = 0; c < cols; ++c) {
                const double w = dense[static_cast<size_t>(row * cols + c)];
                const double xv = x[static_cast<size_t>(t) * x_stride + static_cast<size_t>(c)];
                sum += w * xv;
                double w_magnitude = std::fabs(w);
                if (quantized != nullptr) {
                    // The kernels split w into scale·q + bias; both parts round on their own.
                    const int64_t group = c / quantized->view.group_size;
                    w_magnitude +=
                        2.0 * std::fabs(bf16_to_float(quantized->biases[static_cast<size_t>(
                                  row * quantized->view.groups_per_row() + group)]));
                }
                magnitude += w_magnitude * std::fabs(xv);
            }
            const double got = y[static_cast<size_t>(t) * y_stride + static_cast<size_t>(row)];
            const double bound = 1e-6 + 2.0 * static_cast<double>(cols) * 1.2e-7 * magnitude;
            ASSERT_NEAR(got, sum, bound) << what << " t=" << t << " row=" << row;
        }
    }
}

class Matmul : public ::testing::Test {
protected:
    void TearDown() override { set_kernel_path(KernelPath::Auto); }

    static std::vector<KernelPath> paths() {
        std::vector<KernelPath> result = {KernelPath::Portable};
        if (cpu_has_avx2_fma()) result.push_back(KernelPath::Avx2);
        if (cpu_has_avx512_vnni()) result.push_back(KernelPath::Avx512);
        return result;
    }
};

std::string path_name(KernelPath path) {
    return kernel_path_name(path);
}

TEST_F(Matmul, AffineMatchesReferenceForEveryBitWidthGroupSizeAndRowCount) {
    const int64_t rows = 13;
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int bits : kBits) {
            for (const int group_size : kGroupSizes) {
                const int64_t cols = int64_t{3} * group_size;
                const QuantizedMatrix m = make_matrix(rows, cols, bits, group_size, 17 + bits);
                for (int64_t n_rows = 1; n_rows <= 17; ++n_rows) {
                    const size_t x_stride = static_cast<size_t>(cols) + 5;
                    const size_t y_stride = static_cast<size_t>(rows) + 3;
                    const auto x = random_vector(x_stride * static_cast<size_t>(n_rows), n_rows);
                    std::vector<float> y(y_stride * static_cast<size_t>(n_rows), NAN);
                    matmul(m.view, x.data(), x_stride, n_rows, y.data(), y_stride, nullptr);
                    expect_matches_reference(
                        m.dense, &m, rows, cols, x, x_stride, n_rows, y, y_stride,
                        path_name(path) + " bits=" + std::to_string(bits) + " group=" +
                            std::to_string(group_size) + " n_rows=" + std::to_string(n_rows));
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
}

TEST_F(Matmul, AffineMatchesReferenceForALargeBatchOnThePool) {
    ThreadPool pool(3);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int bits : kBits) {
            const int64_t rows = 71;
            const int64_t cols = 320;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, 64, 5 + bits);
            const int64_t n_rows = 300;
            const auto x = random_vector(static_cast<size_t>(cols * n_rows), 99);
            std::vector<float> y(static_cast<size_t>(rows * n_rows), NAN);
            matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, y.data(),
                   static_cast<size_t>(rows), &pool);
            expect_matches_reference(m.dense, &m, rows, cols, x, static_cast<size_t>(cols), n_rows,
                                     y, static_cast<size_t>(rows),
                                     path_name(path) + " bits=" + std::to_string(bits));
            if (HasFatalFailure()) return;
        }
    }
}

TEST_F(Matmul, Avx2AgreesWithPortable) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
    for (const int bits : kBits) {
        for (const int group_size : kGroupSizes) {
            const int64_t rows = 9;
            const int64_t cols = 2 * group_size + 256;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, group_size, 3);
            for (const int64_t n_rows : {1, 4, 5, 50}) {
                const auto x = random_vector(static_cast<size_t>(cols * n_rows), 7);
                std::vector<float> portable(static_cast<size_t>(rows * n_rows));
                std::vector<float> avx2(portable.size());
                set_kernel_path(KernelPath::Portable);
                matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, portable.data(),
                       static_cast<size_t>(rows), nullptr);
                set_kernel_path(KernelPath::Avx2);
                matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, avx2.data(),
                       static_cast<size_t>(rows), nullptr);
                for (size_t index = 0; index < avx2.size(); ++index) {
                    ASSERT_NEAR(avx2[index], portable[index],
                                1e-4 * (1.0 + std::fabs(portable[index])))
                        << "bits=" << bits << " group=" << group_size << " n_rows=" << n_rows;
                }
            }
        }
    }
}

// The AVX-512 float kernels (two weight rows to a register) take the AVX2 kernels' operations in
// their order: the same bytes, for every width and group size, weight row counts that leave a
// pair's second row missing or a tile short, input rows of the streaming kernel and past its
// cut-over, and a last column block shorter than a whole one.
TEST_F(Matmul, Avx512FloatAgreesWithAvx2BitForBit) {
    if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 on this CPU";
    ThreadPool pool(2);
    for (const int bits : kBits) {
        for (const int group_size : kGroupSizes) {
            for (const int64_t rows : {1, 7, 33, 70}) {
                const int64_t cols = 2 * group_size + 256;
                const QuantizedMatrix m = make_matrix(rows, cols, bits, group_size, 61 + bits);
                for (const int64_t n_rows : {1, 2, 3, 4, 5, 6, 11, 53, 97}) {
                    const size_t x_stride = static_cast<size_t>(cols) + 3;
                    const auto x = random_vector(x_stride * static_cast<size_t>(n_rows), 67);
                    std::vector<float> avx2(static_cast<size_t>(rows * n_rows));
                    std::vector<float> avx512(avx2.size());
                    set_kernel_path(KernelPath::Avx2);
                    matmul(m.view, x.data(), x_stride, n_rows, avx2.data(),
                           static_cast<size_t>(rows), &pool);
                    set_kernel_path(KernelPath::Avx512);
                    matmul(m.view, x.data(), x_stride, n_rows, avx512.data(),
                           static_cast<size_t>(rows), &pool);
                    ASSERT_EQ(std::memcmp(avx2.data(), avx512.data(), avx2.size() * sizeof(float)),
                              0)
                        << "bits=" << bits << " group=" << group_size << " rows=" << rows
                        << " n_rows=" << n_rows;
                }
            }
        }
    }
}

// The sum order is fixed per output element: any thread count gives the same bytes.
TEST_F(Matmul, ResultsAreBitwiseIdenticalForOneTwoAndFourThreads) {
    ThreadPool one(1);
    ThreadPool two(2);
    ThreadPool four(4);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int bits : {3, 4}) {
            const int64_t rows = 517;
            const int64_t cols = 512;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, 64, 11);
            for (const int64_t n_rows : {1, 3, 4, 9, 64}) {
                const auto x = random_vector(static_cast<size_t>(cols * n_rows), 13);
                std::vector<std::vector<float>> results;
                for (ThreadPool* pool : {&one, &two, &four}) {
                    std::vector<float> y(static_cast<size_t>(rows * n_rows));
                    matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, y.data(),
                           static_cast<size_t>(rows), pool);
                    results.push_back(std::move(y));
                }
                for (size_t index = 1; index < results.size(); ++index) {
                    ASSERT_EQ(std::memcmp(results[0].data(), results[index].data(),
                                          results[0].size() * sizeof(float)),
                              0)
                        << path_name(path) << " bits=" << bits << " n_rows=" << n_rows;
                }
            }
        }
    }
}

// A row's output does not depend on what else is in the batch (decode vs prefill vs MTP
// verification give the same logits), across the streaming/blocked cut-over.
TEST_F(Matmul, EachRowIsBitwiseIdenticalToComputingItAlone) {
    ThreadPool pool(2);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int bits : kBits) {
            const int64_t rows = 37;
            const int64_t cols = 640;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, 128, 21);
            for (const int64_t n_rows : {2, 4, 5, 53}) {
                const auto x = random_vector(static_cast<size_t>(cols * n_rows), 23);
                std::vector<float> batch(static_cast<size_t>(rows * n_rows));
                matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, batch.data(),
                       static_cast<size_t>(rows), &pool);
                for (int64_t t = 0; t < n_rows; ++t) {
                    std::vector<float> alone(static_cast<size_t>(rows));
                    matmul(m.view, x.data() + t * cols, static_cast<size_t>(cols), 1, alone.data(),
                           static_cast<size_t>(rows), &pool);
                    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + t * rows,
                                          alone.size() * sizeof(float)),
                              0)
                        << path_name(path) << " bits=" << bits << " n_rows=" << n_rows
                        << " t=" << t;
                }
            }
        }
    }
}

// The unpackers never read past the last code byte: the codes end exactly at a page that
// faults on access.
TEST_F(Matmul, ReadsNoByteAfterTheLastCode) {
    const long page = sysconf(_SC_PAGESIZE);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int bits : kBits) {
            const int64_t rows = 3;
            const int64_t cols = 32;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, 32, 31);
            void* mapping = mmap(nullptr, static_cast<size_t>(2 * page), PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            ASSERT_NE(mapping, MAP_FAILED);
            auto* guard = static_cast<uint8_t*>(mapping) + page;
            ASSERT_EQ(mprotect(guard, static_cast<size_t>(page), PROT_NONE), 0);
            uint8_t* codes = guard - m.codes.size();
            std::memcpy(codes, m.codes.data(), m.codes.size());
            AffineMatrix view = m.view;
            view.codes = codes;
            for (const int64_t n_rows : {1, 2, 3, 4, 5, 9}) {
                const auto x = random_vector(static_cast<size_t>(cols * n_rows), 37);
                std::vector<float> y(static_cast<size_t>(rows * n_rows));
                matmul(view, x.data(), static_cast<size_t>(cols), n_rows, y.data(),
                       static_cast<size_t>(rows), nullptr);
                expect_matches_reference(m.dense, &m, rows, cols, x, static_cast<size_t>(cols),
                                         n_rows, y, static_cast<size_t>(rows),
                                         path_name(path) + " bits=" + std::to_string(bits));
            }
            std::vector<float> row(static_cast<size_t>(cols));
            dequantize_row(view, rows - 1, row.data());
            munmap(mapping, static_cast<size_t>(2 * page));
            if (HasFatalFailure()) return;
        }
    }
}

TEST_F(Matmul, DequantizeRowEqualsTheModelDataDequantizer) {
    for (const int bits : kBits) {
        for (const int group_size : kGroupSizes) {
            const int64_t rows = 5;
            const int64_t cols = int64_t{2} * group_size;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, group_size, 41);
            for (int64_t row = 0; row < rows; ++row) {
                std::vector<float> out(static_cast<size_t>(cols));
                dequantize_row(m.view, row, out.data());
                ASSERT_EQ(std::memcmp(out.data(), m.dense.data() + row * cols,
                                      out.size() * sizeof(float)),
                          0)
                    << "bits=" << bits << " group=" << group_size << " row=" << row;
            }
        }
    }
}

TEST_F(Matmul, F32MatchesReference) {
    ThreadPool pool(2);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int64_t cols : {8, 37, 259}) {
            const int64_t rows = 11;
            const auto w = random_vector(static_cast<size_t>(rows * cols), 43);
            const F32Matrix view{rows, cols, w.data()};
            for (const int64_t n_rows : {1, 2, 3, 4, 5, 17, 300}) {
                const size_t x_stride = static_cast<size_t>(cols) + 1;
                const auto x = random_vector(x_stride * static_cast<size_t>(n_rows), 47);
                std::vector<float> y(static_cast<size_t>(rows * n_rows));
                matmul(view, x.data(), x_stride, n_rows, y.data(), static_cast<size_t>(rows),
                       &pool);
                expect_matches_reference(w, nullptr, rows, cols, x, x_stride, n_rows, y,
                                         static_cast<size_t>(rows),
                                         path_name(path) + " cols=" + std::to_string(cols));
                if (HasFatalFailure()) return;
            }
        }
    }
}

TEST_F(Matmul, F32IsBitwiseIdenticalAcrossThreadCountsAndBatches) {
    ThreadPool one(1);
    ThreadPool four(4);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        const int64_t rows = 256;
        const int64_t cols = 1027;
        const auto w = random_vector(static_cast<size_t>(rows * cols), 53);
        const F32Matrix view{rows, cols, w.data()};
        const int64_t n_rows = 7;
        const auto x = random_vector(static_cast<size_t>(cols * n_rows), 59);
        std::vector<float> a(static_cast<size_t>(rows * n_rows));
        std::vector<float> b(a.size());
        matmul(view, x.data(), static_cast<size_t>(cols), n_rows, a.data(),
               static_cast<size_t>(rows), &one);
        matmul(view, x.data(), static_cast<size_t>(cols), n_rows, b.data(),
               static_cast<size_t>(rows), &four);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
        std::vector<float> alone(static_cast<size_t>(rows));
        matmul(view, x.data() + 5 * cols, static_cast<size_t>(cols), 1, alone.data(),
               static_cast<size_t>(rows), &four);
        ASSERT_EQ(std::memcmp(alone.data(), a.data() + 5 * rows, alone.size() * sizeof(float)), 0);
    }
}

TEST_F(Matmul, RejectsUnsupportedShapes) {
    const QuantizedMatrix m = make_matrix(2, 64, 4, 64, 1);
    std::vector<float> x(64);
    std::vector<float> y(2);
    AffineMatrix bad = m.view;
    bad.group_size = 16;
    try {
        matmul(bad, x.data(), 64, 1, y.data(), 2, nullptr);
        FAIL() << "group size 16 accepted";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Unsupported);
        EXPECT_NE(std::string(error.what()).find("group size 16"), std::string::npos);
    }
    bad = m.view;
    bad.bits = 7;
    EXPECT_THROW(matmul(bad, x.data(), 64, 1, y.data(), 2, nullptr), Error);
    bad = m.view;
    bad.cols = 48;
    EXPECT_THROW(matmul(bad, x.data(), 48, 1, y.data(), 2, nullptr), Error);
    EXPECT_THROW(matmul(m.view, x.data(), 32, 2, y.data(), 2, nullptr), Error);  // x_stride < cols
}

TEST_F(Matmul, KernelPathOverride) {
    set_kernel_path(KernelPath::Portable);
    EXPECT_EQ(active_kernel_path(), KernelPath::Portable);
    set_kernel_path(KernelPath::Auto);
    const KernelPath best = cpu_has_avx512_vnni() ? KernelPath::Avx512
                            : cpu_has_avx2_fma()  ? KernelPath::Avx2
                                                  : KernelPath::Portable;
    EXPECT_EQ(active_kernel_path(), best);
    if (!cpu_has_avx2_fma()) {
        EXPECT_THROW(set_kernel_path(KernelPath::Avx2), Error);
    }
    if (!cpu_has_avx512_vnni()) {
        EXPECT_THROW(set_kernel_path(KernelPath::Avx512), Error);
    }
    EXPECT_STREQ(kernel_path_name(KernelPath::Avx512), "avx512");
}

// ---- int8 activations (ActivationPrecision::Q8) -------------------------------------------

// x's group quantized as matmul_kernels.h specifies, independently of the kernels:
// step = max|x| / 127, q = round-half-even(x · (127 / max|x|)).
struct QuantizedGroup {
    float step = 0.0F;
    std::vector<int> codes;
};

QuantizedGroup quantize_group(const float* x, int group_size) {
    QuantizedGroup q;
    float amax = 0.0F;
    for (int c = 0; c < group_size; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float inverse = amax > 0.0F ? 127.0F / amax : 0.0F;
    q.step = amax / 127.0F;
    for (int c = 0; c < group_size; ++c) {
        q.codes.push_back(static_cast<int>(std::nearbyint(x[c] * inverse)));
    }
    return q;
}

// Q8 against two references in double: the same sum with the test's own quantization of x
// (only float rounding may differ), and the unquantized product (off by at most half a step of
// each activation times |w|: the bias part also takes the quantized x).
void expect_q8_matches_reference(const QuantizedMatrix& m, const std::vector<float>& x,
                                 int64_t n_rows, const std::vector<float>& y,
                                 const std::string& what) {
    const AffineMatrix& w = m.view;
    const int64_t n_groups = w.groups_per_row();
    for (int64_t t = 0; t < n_rows; ++t) {
        for (int64_t row = 0; row < w.rows; ++row) {
            double same = 0.0;
            double exact = 0.0;
            double magnitude = 0.0;
            double rounding = 0.0;
            for (int64_t group = 0; group < n_groups; ++group) {
                const float* xg = x.data() + t * w.cols + group * w.group_size;
                const QuantizedGroup q = quantize_group(xg, w.group_size);
                const size_t at = static_cast<size_t>(row * n_groups + group);
                const double scale = bf16_to_float(m.scales[at]);
                const double bias = bf16_to_float(m.biases[at]);
                for (int c = 0; c < w.group_size; ++c) {
                    const int64_t column = group * w.group_size + c;
                    const double code =
                        (m.dense[static_cast<size_t>(row * w.cols + column)] - bias) / scale;
                    const double xq = q.step * q.codes[static_cast<size_t>(c)];
                    const double weight = m.dense[static_cast<size_t>(row * w.cols + column)];
                    same += scale * code * xq + bias * xq;
                    exact += weight * xg[c];
                    magnitude +=
                        (std::fabs(scale * code) + 2.0 * std::fabs(bias)) * std::fabs(xg[c]);
                    rounding += std::fabs(weight) * 0.5 * q.step;
                }
            }
            const double got = y[static_cast<size_t>(t * w.rows + row)];
            const double float_bound =
                1e-6 + 2.0 * static_cast<double>(w.cols) * 1.2e-7 * magnitude;
            ASSERT_NEAR(got, same, float_bound) << what << " t=" << t << " row=" << row;
            ASSERT_NEAR(got, exact, float_bound + rounding * 1.001)
                << what << " t=" << t << " row=" << row;
        }
    }
}

TEST_F(Matmul, Q8MatchesReferenceForEveryRowCount) {
    ThreadPool pool(3);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const int group_size : {64, 128}) {
            const int64_t rows = 23;
            const int64_t cols = int64_t{3} * group_size;
            const QuantizedMatrix m = make_matrix(rows, cols, 4, group_size, 57 + group_size);
            for (const int64_t n_rows : {1, 2, 3, 4, 5, 7, 66, 131}) {
                auto x = random_vector(static_cast<size_t>(cols * n_rows), 59 + n_rows);
                // A row of zeros (no scale to take) and one with a single large value.
                std::fill(x.begin(), x.begin() + cols, 0.0F);
                if (n_rows > 1) x[static_cast<size_t>(cols + 5)] = 40.0F;
                std::vector<float> y(static_cast<size_t>(rows * n_rows), NAN);
                matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, y.data(),
                       static_cast<size_t>(rows), &pool, ActivationPrecision::Q8);
                expect_q8_matches_reference(m, x, n_rows, y,
                                            path_name(path) +
                                                " group=" + std::to_string(group_size) +
                                                " n_rows=" + std::to_string(n_rows));
                if (HasFatalFailure()) return;
            }
        }
    }
}

// Every family makes the same activation bytes and the same fused sums: the same bits. The
// widths cover whole octets of groups, a last partial octet and (group size 64) an odd number of
// groups, whose last block the AVX-512 kernel takes alone.
void expect_q8_families_agree(KernelPath vector_path) {
    for (const int group_size : {64, 128}) {
        for (const int64_t n_groups : {int64_t{2} + 256 / group_size, int64_t{19}}) {
            const int64_t rows = 11;
            const int64_t cols = n_groups * group_size;
            const QuantizedMatrix m = make_matrix(rows, cols, 4, group_size, 61);
            for (const int64_t n_rows : {1, 2, 3, 4, 5, 7, 50}) {
                const size_t x_stride = static_cast<size_t>(cols) + 3;
                const auto x = random_vector(x_stride * static_cast<size_t>(n_rows), 67);
                std::vector<float> portable(static_cast<size_t>(rows * n_rows));
                std::vector<float> vector(portable.size());
                set_kernel_path(KernelPath::Portable);
                matmul(m.view, x.data(), x_stride, n_rows, portable.data(),
                       static_cast<size_t>(rows), nullptr, ActivationPrecision::Q8);
                set_kernel_path(vector_path);
                matmul(m.view, x.data(), x_stride, n_rows, vector.data(), static_cast<size_t>(rows),
                       nullptr, ActivationPrecision::Q8);
                ASSERT_EQ(
                    std::memcmp(portable.data(), vector.data(), vector.size() * sizeof(float)), 0)
                    << path_name(vector_path) << " group=" << group_size << " cols=" << cols
                    << " n_rows=" << n_rows;
            }
        }
    }
}

TEST_F(Matmul, Q8FamiliesAgreeBitForBit) {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
    expect_q8_families_agree(KernelPath::Avx2);
}

TEST_F(Matmul, Q8Avx512AgreesBitForBit) {
    if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    expect_q8_families_agree(KernelPath::Avx512);
}

// As for F32: the same bytes for any thread count, and each row as if computed alone (decode,
// prefill and MTP verification agree), across the one-row and tiled kernels.
TEST_F(Matmul, Q8IsBitwiseIdenticalAcrossThreadCountsAndBatches) {
    ThreadPool one(1);
    ThreadPool two(2);
    ThreadPool four(4);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        const int64_t rows = 517;
        const int64_t cols = 640;
        const QuantizedMatrix m = make_matrix(rows, cols, 4, 64, 71);
        for (const int64_t n_rows : {2, 3, 4, 9, 70}) {
            const auto x = random_vector(static_cast<size_t>(cols * n_rows), 73);
            std::vector<std::vector<float>> results;
            for (ThreadPool* pool : {&one, &two, &four}) {
                std::vector<float> y(static_cast<size_t>(rows * n_rows));
                matmul(m.view, x.data(), static_cast<size_t>(cols), n_rows, y.data(),
                       static_cast<size_t>(rows), pool, ActivationPrecision::Q8);
                results.push_back(std::move(y));
            }
            for (size_t index = 1; index < results.size(); ++index) {
                ASSERT_EQ(std::memcmp(results[0].data(), results[index].data(),
                                      results[0].size() * sizeof(float)),
                          0)
                    << path_name(path) << " n_rows=" << n_rows << " pool " << index;
            }
            for (int64_t t = 0; t < n_rows; ++t) {
                std::vector<float> alone(static_cast<size_t>(rows));
                matmul(m.view, x.data() + t * cols, static_cast<size_t>(cols), 1, alone.data(),
                       static_cast<size_t>(rows), &two, ActivationPrecision::Q8);
                ASSERT_EQ(std::memcmp(alone.data(), results[0].data() + t * rows,
                                      alone.size() * sizeof(float)),
                          0)
                    << path_name(path) << " n_rows=" << n_rows << " t=" << t;
            }
        }
    }
}

// Other bit widths and group sizes have no integer kernel: Q8 asks, F32 answers.
TEST_F(Matmul, Q8LeavesOtherMatricesInFloat) {
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const auto& [bits, group_size] : {std::pair{4, 32}, {3, 64}, {8, 64}, {2, 128}}) {
            const int64_t rows = 9;
            const int64_t cols = 256;
            const QuantizedMatrix m = make_matrix(rows, cols, bits, group_size, 79);
            const auto x = random_vector(static_cast<size_t>(cols * 5), 83);
            std::vector<float> f32(static_cast<size_t>(rows * 5));
            std::vector<float> q8(f32.size());
            matmul(m.view, x.data(), static_cast<size_t>(cols), 5, f32.data(),
                   static_cast<size_t>(rows), nullptr, ActivationPrecision::F32);
            matmul(m.view, x.data(), static_cast<size_t>(cols), 5, q8.data(),
                   static_cast<size_t>(rows), nullptr, ActivationPrecision::Q8);
            ASSERT_EQ(std::memcmp(f32.data(), q8.data(), q8.size() * sizeof(float)), 0)
                << path_name(path) << " bits=" << bits << " group=" << group_size;
        }
    }
}

TEST(ActivationPrecisionNames, RoundTripAndRejectOthers) {
    for (const ActivationPrecision a : {ActivationPrecision::F32, ActivationPrecision::Q8}) {
        EXPECT_EQ(parse_activation_precision(activation_precision_name(a), "--x"), a);
    }
    try {
        parse_activation_precision("int8", "--cpu-activations");
        FAIL() << "accepted int8";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--cpu-activations"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("f32 or q8"), std::string::npos);
    }
}

// Matrices sharing one input (an expert's gate and up) give what each gives alone, bit for bit,
// whatever the precision, the kernel family and the thread count; mismatched layouts are refused.
TEST_F(Matmul, SharedInputGivesEachMatrixItsOwnResult) {
    ThreadPool one(1);
    ThreadPool three(3);
    const QuantizedMatrix gate = make_matrix(37, 256, 4, 64, 89);
    const QuantizedMatrix up = make_matrix(5, 256, 4, 64, 97);
    const QuantizedMatrix narrow = make_matrix(9, 256, 4, 128, 101);
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const ActivationPrecision a : {ActivationPrecision::F32, ActivationPrecision::Q8}) {
            for (const int64_t n_rows : {1, 3, 6, 40}) {
                const size_t x_stride = 256 + 3;
                const auto x = random_vector(x_stride * static_cast<size_t>(n_rows), 103);
                for (ThreadPool* pool : {&one, &three}) {
                    std::vector<float> g(static_cast<size_t>(37 * n_rows));
                    std::vector<float> u(static_cast<size_t>(5 * n_rows));
                    const AffineMatrix* const ws[] = {&gate.view, &up.view};
                    float* const ys[] = {g.data(), u.data()};
                    matmul_shared_input(ws, x.data(), x_stride, n_rows, ys, pool, a);
                    std::vector<float> g_alone(g.size());
                    std::vector<float> u_alone(u.size());
                    matmul(gate.view, x.data(), x_stride, n_rows, g_alone.data(), 37, pool, a);
                    matmul(up.view, x.data(), x_stride, n_rows, u_alone.data(), 5, pool, a);
                    ASSERT_EQ(std::memcmp(g.data(), g_alone.data(), g.size() * sizeof(float)), 0)
                        << path_name(path) << " n_rows=" << n_rows;
                    ASSERT_EQ(std::memcmp(u.data(), u_alone.data(), u.size() * sizeof(float)), 0)
                        << path_name(path) << " n_rows=" << n_rows;
                }
            }
        }
    }
    std::vector<float> y(64);
    const auto x = random_vector(256, 107);
    const AffineMatrix* const mixed[] = {&gate.view, &narrow.view};
    float* const outputs[] = {y.data(), y.data()};
    EXPECT_THROW(matmul_shared_input(mixed, x.data(), 256, 1, outputs, nullptr), Error);
    EXPECT_THROW(matmul_shared_input(std::span(mixed, 1), x.data(), 256, 1, outputs, nullptr),
                 Error);
}

// Matrices that each take their own input (several experts' down projections), some inputs
// repeated, give what each gives alone, bit for bit, in both precisions, both kernel families and
// for 1 and 3 threads; more matrices than the four of a shared input; inputs and outputs that do
// not pair up, or layouts that differ, are refused.
TEST_F(Matmul, EachInputGivesEachMatrixItsOwnResult) {
    ThreadPool one(1);
    ThreadPool three(3);
    std::vector<QuantizedMatrix> matrices;
    for (int i = 0; i < 6; ++i) matrices.push_back(make_matrix(11 + 7 * i, 128, 4, 64, 200 + i));
    for (const KernelPath path : paths()) {
        set_kernel_path(path);
        for (const ActivationPrecision a : {ActivationPrecision::F32, ActivationPrecision::Q8}) {
            for (const int64_t n_rows : {1, 2, 4, 37}) {
                std::vector<std::vector<float>> inputs;
                for (int i = 0; i < 4; ++i) {
                    inputs.push_back(random_vector(static_cast<size_t>(128 * n_rows), 300 + i));
                }
                for (ThreadPool* pool : {&one, &three}) {
                    std::vector<const AffineMatrix*> ws;
                    std::vector<const float*> xs;
                    std::vector<std::vector<float>> outputs;
                    std::vector<float*> ys;
                    for (size_t i = 0; i < matrices.size(); ++i) {
                        ws.push_back(&matrices[i].view);
                        xs.push_back(inputs[i % inputs.size()].data());  // inputs 0 and 1 twice
                        outputs.emplace_back(static_cast<size_t>(matrices[i].view.rows * n_rows));
                    }
                    for (auto& o : outputs) ys.push_back(o.data());
                    matmul_each_input(ws, xs, n_rows, ys, pool, a);
                    for (size_t i = 0; i < matrices.size(); ++i) {
                        std::vector<float> alone(outputs[i].size());
                        const auto rows = static_cast<size_t>(matrices[i].view.rows);
                        matmul(matrices[i].view, xs[i], 128, n_rows, alone.data(), rows, pool, a);
                        ASSERT_EQ(std::memcmp(outputs[i].data(), alone.data(),
                                              alone.size() * sizeof(float)),
                                  0)
                            << path_name(path) << " n_rows=" << n_rows << " matrix " << i;
                    }
                }
            }
        }
    }
    const QuantizedMatrix narrow = make_matrix(9, 128, 4, 128, 401);
    const auto x = random_vector(128, 403);
    std::vector<float> y(64);
    const AffineMatrix* const mixed[] = {&matrices[0].view, &narrow.view};
    const float* const two_inputs[] = {x.data(), x.data()};
    float* const two_outputs[] = {y.data(), y.data()};
    EXPECT_THROW(matmul_each_input(mixed, two_inputs, 1, two_outputs, nullptr), Error);
    EXPECT_THROW(
        matmul_each_input(std::span(mixed, 1), two_inputs, 1, std::span(two_outputs, 1), nullptr),
        Error);
}

}  // namespace
}  // namespace cherenkov::engine
