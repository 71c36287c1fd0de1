// CPU matmul throughput: `matmul_bench [--quick]` times the affine kernels on FN-like shapes
// (dense [10240, 2560] and [2560, 6144], an expert [640, 2560]) at Q4/Q3/Q2 group 64, for every
// kernel family (each with float and, for Q4, int8 activations: rows `port-q8`, `avx2-q8`, and
// `avx512` (float) and `vnni-q8` where the CPU has AVX-512 VNNI; `--shape TEXT` keeps the shapes
// whose name has TEXT)
// and for 1 thread and all CPUs, and the machine's memcpy bandwidth in the same run. Decode (1,
// 2, 4 input rows) reports GB/s of weight bytes (codes + scales + biases) read, cycling through
// enough copies of the matrix to exceed the last-level cache, and its ratio to memcpy; prefill
// (128, 512 rows) reports GFLOP/s (2·rows·cols·n_rows). Best of several runs.
// Wall-clock figures suffer from other load on a shared machine; single-thread rows therefore
// also give the figure from the thread's CPU time (in brackets: [cpu]), which other processes
// do not inflate.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"

namespace {

using cherenkov::engine::ActivationPrecision;
using cherenkov::engine::AffineMatrix;
using cherenkov::engine::KernelPath;
using cherenkov::engine::ThreadPool;

constexpr size_t kStreamBytes = size_t{512} << 20;  // decode working set: past any LLC

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct Timing {
    double wall = 1e30;  // best wall-clock seconds
    double cpu = 1e30;   // best CPU seconds of the calling thread
};

// Best times of `work` over at least `min_runs` runs and about `min_seconds` in total.
Timing best_seconds(const std::function<void()>& work, int min_runs, double min_seconds) {
    Timing best;
    const double start = now_seconds();
    for (int run = 0; run < min_runs || now_seconds() - start < min_seconds; ++run) {
        const double begin = now_seconds();
        const double cpu_begin = thread_cpu_seconds();
        work();
        best.cpu = std::min(best.cpu, thread_cpu_seconds() - cpu_begin);
        best.wall = std::min(best.wall, now_seconds() - begin);
        if (run >= 50) break;
    }
    return best;
}

struct Shape {
    const char* name;
    int64_t rows;
    int64_t cols;
    int bits;
};

// n_copies copies of one random matrix's bytes, each copy a separate AffineMatrix.
struct MatrixSet {
    std::vector<uint8_t> codes;
    std::vector<uint16_t> scales;
    std::vector<uint16_t> biases;
    std::vector<AffineMatrix> copies;
    size_t bytes_per_copy = 0;
};

MatrixSet make_matrices(const Shape& shape, int group_size, size_t n_copies) {
    MatrixSet set;
    AffineMatrix m{shape.rows, shape.cols, shape.bits, group_size, nullptr, nullptr, nullptr};
    const size_t code_bytes = static_cast<size_t>(shape.rows) * m.row_code_bytes();
    const size_t n_params = static_cast<size_t>(shape.rows * m.groups_per_row());
    set.codes.resize(code_bytes * n_copies);
    set.scales.resize(n_params * n_copies);
    set.biases.resize(n_params * n_copies);
    std::mt19937_64 rng(shape.rows * 31 + shape.cols + shape.bits);
    for (size_t index = 0; index < set.codes.size(); index += 8) {
        const uint64_t word = rng();
        std::memcpy(set.codes.data() + index, &word, std::min<size_t>(8, set.codes.size() - index));
    }
    std::uniform_real_distribution<float> scale(0.001F, 0.02F);
    std::uniform_real_distribution<float> bias(-0.1F, 0.1F);
    for (size_t index = 0; index < set.scales.size(); ++index) {
        set.scales[index] = cherenkov::float_to_bf16(scale(rng));
        set.biases[index] = cherenkov::float_to_bf16(bias(rng));
    }
    for (size_t copy = 0; copy < n_copies; ++copy) {
        AffineMatrix view = m;
        view.codes = set.codes.data() + copy * code_bytes;
        view.scales = set.scales.data() + copy * n_params;
        view.biases = set.biases.data() + copy * n_params;
        set.copies.push_back(view);
    }
    set.bytes_per_copy = code_bytes + 2 * n_params * sizeof(uint16_t);
    return set;
}

// Bytes copied per second by memcpy over a working set of 2 × kStreamBytes, split over the pool.
Timing memcpy_seconds(ThreadPool& pool) {
    std::vector<uint8_t> source(kStreamBytes, 1);
    std::vector<uint8_t> target(kStreamBytes, 2);
    const size_t n_chunks = 64;
    return best_seconds(
        [&] {
            pool.parallel_for(n_chunks, 1, [&](size_t begin, size_t end) {
                const size_t chunk = kStreamBytes / n_chunks;
                std::memcpy(target.data() + begin * chunk, source.data() + begin * chunk,
                            (end - begin) * chunk);
            });
        },
        3, 1.0);
}

double gb_per_s(double bytes, double seconds) {
    return bytes / seconds / 1e9;
}

// A kernel family and an activation precision; Q8 runs only where the matrix takes it.
struct Variant {
    KernelPath path;
    ActivationPrecision activations;
    const char* name;
};

std::vector<Variant> variants_for(const Shape& shape, const std::vector<Variant>& all) {
    std::vector<Variant> result;
    for (const Variant& variant : all) {
        if (variant.activations == ActivationPrecision::Q8 && shape.bits != 4) continue;
        result.push_back(variant);
    }
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string only_shape;  // --shape TEXT: only shapes whose name contains TEXT
    for (int arg = 1; arg < argc; ++arg) {
        const std::string word = argv[arg];
        if (word == "--quick") {
            quick = true;
        } else if (word == "--shape" && arg + 1 < argc) {
            only_shape = argv[++arg];
        } else {
            std::fprintf(stderr, "usage: matmul_bench [--quick] [--shape TEXT]\n");
            return 2;
        }
    }
    ThreadPool single(1);
    ThreadPool all(0);
    std::vector<Variant> all_variants = {
        {KernelPath::Portable, ActivationPrecision::F32, "portable"},
        {KernelPath::Portable, ActivationPrecision::Q8, "port-q8"}};
    if (cherenkov::engine::cpu_has_avx2_fma()) {
        all_variants.push_back({KernelPath::Avx2, ActivationPrecision::F32, "avx2"});
        all_variants.push_back({KernelPath::Avx2, ActivationPrecision::Q8, "avx2-q8"});
    }
    if (cherenkov::engine::cpu_has_avx512_vnni()) {
        all_variants.push_back({KernelPath::Avx512, ActivationPrecision::F32, "avx512"});
        all_variants.push_back({KernelPath::Avx512, ActivationPrecision::Q8, "vnni-q8"});
    }

    const Timing memcpy_one_time = memcpy_seconds(single);
    const double memcpy_one = gb_per_s(kStreamBytes, memcpy_one_time.wall);
    const double memcpy_one_cpu = gb_per_s(kStreamBytes, memcpy_one_time.cpu);
    const double memcpy_all = gb_per_s(kStreamBytes, memcpy_seconds(all).wall);
    std::printf("machine: %d CPUs, AVX2/FMA %s, AVX-512 VNNI %s\n", all.size(),
                cherenkov::engine::cpu_has_avx2_fma() ? "yes" : "no",
                cherenkov::engine::cpu_has_avx512_vnni() ? "yes" : "no");
    std::printf(
        "memcpy (%zu MiB, bytes copied): 1 thread %.2f GB/s [cpu %.2f], %d threads %.2f GB/s\n\n",
        kStreamBytes >> 20, memcpy_one, memcpy_one_cpu, all.size(), memcpy_all);

    std::vector<Shape> shapes = {
        {"dense [10240,2560]", 10240, 2560, 4}, {"dense [10240,2560]", 10240, 2560, 3},
        {"dense [10240,2560]", 10240, 2560, 2}, {"dense [2560,6144]", 2560, 6144, 4},
        {"dense [2560,6144]", 2560, 6144, 3},   {"dense [2560,6144]", 2560, 6144, 2},
        {"expert [640,2560]", 640, 2560, 4},    {"expert [640,2560]", 640, 2560, 2},
    };
    std::erase_if(shapes, [&](const Shape& shape) {
        return std::string(shape.name).find(only_shape) == std::string::npos;
    });
    const int group_size = 64;

    std::printf(
        "decode: GB/s of weight bytes (ratio to memcpy with the same threads) [cpu-time GB/s]\n");
    std::printf("%-20s %-3s %-8s %-4s %23s %23s %23s\n", "shape", "q", "path", "thr", "1 row",
                "2 rows", "4 rows");
    for (const Shape& shape : shapes) {
        MatrixSet probe = make_matrices(shape, group_size, 1);
        const size_t n_copies = std::max<size_t>(1, kStreamBytes / probe.bytes_per_copy);
        probe = {};
        const MatrixSet set = make_matrices(shape, group_size, n_copies);
        std::vector<float> x(static_cast<size_t>(4 * shape.cols), 0.5F);
        std::vector<float> y(static_cast<size_t>(4 * shape.rows));
        for (const Variant& variant : variants_for(shape, all_variants)) {
            cherenkov::engine::set_kernel_path(variant.path);
            for (ThreadPool* pool : {&single, &all}) {
                const bool one_thread = pool == &single;
                const double reference = one_thread ? memcpy_one : memcpy_all;
                std::printf("%-20s Q%-2d %-8s %-4d", shape.name, shape.bits, variant.name,
                            pool->size());
                for (const int64_t n_rows : {1, 2, 4}) {
                    const Timing seconds = best_seconds(
                        [&] {
                            for (const AffineMatrix& m : set.copies) {
                                cherenkov::engine::matmul(
                                    m, x.data(), static_cast<size_t>(shape.cols), n_rows, y.data(),
                                    static_cast<size_t>(shape.rows), pool, variant.activations);
                            }
                        },
                        quick ? 1 : 3, quick ? 0.2 : 1.0);
                    const auto bytes = static_cast<double>(set.bytes_per_copy * set.copies.size());
                    const double gbps = gb_per_s(bytes, seconds.wall);
                    if (one_thread) {
                        std::printf(" %6.2f (%4.2fx) [%5.2f]", gbps, gbps / reference,
                                    gb_per_s(bytes, seconds.cpu));
                    } else {
                        std::printf(" %6.2f (%4.2fx)        ", gbps, gbps / reference);
                    }
                }
                std::printf("\n");
                std::fflush(stdout);
            }
        }
    }

    std::printf("\nprefill: GFLOP/s (2·rows·cols·n_rows) [cpu-time GFLOP/s]\n");
    std::printf("%-20s %-3s %-8s %-4s %15s %15s\n", "shape", "q", "path", "thr", "128 rows",
                "512 rows");
    for (const Shape& shape : shapes) {
        const MatrixSet set = make_matrices(shape, group_size, 1);
        std::vector<float> x(static_cast<size_t>(512 * shape.cols));
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
        for (float& value : x) value = uniform(rng);
        std::vector<float> y(static_cast<size_t>(512 * shape.rows));
        for (const Variant& variant : variants_for(shape, all_variants)) {
            cherenkov::engine::set_kernel_path(variant.path);
            for (ThreadPool* pool : {&single, &all}) {
                std::printf("%-20s Q%-2d %-8s %-4d", shape.name, shape.bits, variant.name,
                            pool->size());
                for (const int64_t n_rows : {128, 512}) {
                    const Timing seconds = best_seconds(
                        [&] {
                            cherenkov::engine::matmul(set.copies[0], x.data(),
                                                      static_cast<size_t>(shape.cols), n_rows,
                                                      y.data(), static_cast<size_t>(shape.rows),
                                                      pool, variant.activations);
                        },
                        quick || variant.path == KernelPath::Portable ? 1 : 2, quick ? 0.1 : 0.5);
                    const double flops = 2.0 * static_cast<double>(shape.rows) *
                                         static_cast<double>(shape.cols) *
                                         static_cast<double>(n_rows);
                    if (pool == &single) {
                        std::printf(" %7.1f [%5.1f]", flops / seconds.wall / 1e9,
                                    flops / seconds.cpu / 1e9);
                    } else {
                        std::printf(" %7.1f        ", flops / seconds.wall / 1e9);
                    }
                }
                std::printf("\n");
                std::fflush(stdout);
            }
        }
    }
    cherenkov::engine::set_kernel_path(KernelPath::Auto);
    return 0;
}
