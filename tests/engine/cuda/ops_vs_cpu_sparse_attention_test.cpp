// The op-vs-CPU harness for QSA attention (ops_vs_cpu.h): cuda::sparse_attention_forward
// (sparse_attention.cu) against the CPU layer engine::sparse_attention_forward on random weights
// and rows: the Flash shape and a small odd shape with the indexer (a small top-K, so the sparse
// path runs within a few hundred tokens), a shape without indexer, prefill then decode of 1 and 3
// rows, the caches after every call, truncation followed by re-appending, and the cache
// contract. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/layers.h"
#include "engine/model/ops.h"

namespace cherenkov::engine::cuda {
namespace {

namespace q4 = model_data::qwen4_exp;

// Cache entries are O(1-10); the two sides differ by the rounding of 2560-term float32 sums of
// affine weights (~1e-5 of an entry), while an indexing, position or head bug is off by O(1).
constexpr double kCacheTolerance = 5e-4;
// y[r] against ‖W_o[r, :]‖₂ · max|v|: the gated attention output is a convex combination of
// values times a sigmoid (|gated| ≤ max|v|) and differs by rounding of ~1e-5 of that; a wrong
// token or head moves it by ~1e-2 or more. With o = I (the small shapes) this checks the gated
// output itself.
constexpr double kOutputTolerance = 2e-4;
// Rows whose CPU selection has a K-th vs (K+1)-th score margin in (0, this) are near ties (scores
// differ by ~1e-5 between the sides): the GPU may select the other block, so their outputs and
// selections are not compared.
constexpr float kMinMargin = 1e-3F;

using affine_test::splitmix;
using affine_test::uniform;

struct Shape {
    int64_t hidden = 0;
    int64_t n_heads = 0;
    int64_t n_kv = 0;
    int64_t head_dim = 0;
    int64_t rotary_dim = 0;
    bool indexer = true;
    int64_t n_index_heads = 0;
    int64_t index_dim = 0;
    int64_t ratio = 0;        // r
    int64_t top = 0;          // K
    bool identity_o = false;  // o = I (needs n_heads·head_dim == hidden): y is the gated output
};

// Flash: H 2560, 24 heads, 2 KV, D 256, rotary 64, indexer 4 × 128, r 4; K 8 instead of 512.
constexpr Shape kFlash{2560, 24, 2, 256, 64, true, 4, 128, 4, 8, false};
// Small and odd: r 3, 5 blocks, a group of 2, rotary 32 of 64 dims and of 32 indexer dims.
constexpr Shape kSmall{256, 4, 2, 64, 32, true, 2, 32, 3, 5, true};
constexpr Shape kNoIndexer{256, 4, 1, 64, 32, false, 0, 0, 0, 0, true};

q4::Config make_config(const Shape& s) {
    q4::Config c;
    c.hidden_size = s.hidden;
    c.num_attention_heads = s.n_heads;
    c.num_key_value_heads = s.n_kv;
    c.head_dim = s.head_dim;
    c.rms_norm_eps = 1e-6;
    c.rope.rope_theta = 10000.0;
    c.rope.partial_rotary_factor =
        static_cast<double>(s.rotary_dim) / static_cast<double>(s.head_dim);
    c.rotary_dim = s.rotary_dim;
    c.gqa_group = s.n_heads / s.n_kv;
    if (s.indexer) {
        c.indexer = q4::IndexerConfig{s.n_index_heads, 1, s.index_dim, s.top * s.ratio, s.ratio};
        c.block_topk = s.top;
    }
    return c;
}

// The layer's weights in one host buffer (each tensor at a 256-byte aligned offset, as in
// dense.bin), 4-bit affine with groups of 64: random codes, scales ~0.02-0.03 of either sign,
// biases centring w on zero. Norm weights in [0.75, 1.25).
struct TestLayer {
    std::vector<uint64_t> storage;
    SparseAttentionWeights weights;
    std::vector<double> o_row_norm;  // ‖W_o[r, :]‖₂

    const void* base() const { return storage.data(); }
    uint64_t n_bytes() const { return storage.size() * sizeof(uint64_t); }
};

class Layout {
public:
    size_t take(size_t bytes) {
        const size_t at = size_;
        size_ += (bytes + 255) / 256 * 256;
        return at;
    }
    size_t size() const { return size_; }

private:
    size_t size_ = 0;
};

struct AffinePlan {
    int64_t rows = 0;
    int64_t cols = 0;
    size_t codes = 0;
    size_t scales = 0;
    size_t biases = 0;
};

AffinePlan plan_affine(Layout& layout, int64_t rows, int64_t cols) {
    const auto n_groups = static_cast<size_t>(rows * (cols / 64));
    return AffinePlan{rows, cols, layout.take(static_cast<size_t>(rows * cols / 2)),
                      layout.take(n_groups * 2), layout.take(n_groups * 2)};
}

Linear fill_affine(uint8_t* base, const AffinePlan& plan, uint64_t& state) {
    auto* codes = base + plan.codes;
    for (int64_t i = 0; i < plan.rows * plan.cols / 2; ++i) {
        codes[i] = static_cast<uint8_t>(splitmix(state));
    }
    auto* scales = reinterpret_cast<uint16_t*>(base + plan.scales);
    auto* biases = reinterpret_cast<uint16_t*>(base + plan.biases);
    for (int64_t g = 0; g < plan.rows * (plan.cols / 64); ++g) {
        const float scale =
            (0.02F + 0.01F * uniform(state)) * (uniform(state) < 0.0F ? -1.0F : 1.0F);
        scales[g] = float_to_bf16(scale);
        biases[g] = float_to_bf16(-scale * 7.5F + 0.01F * uniform(state));
    }
    Linear linear;
    linear.quantized = true;
    linear.affine = AffineMatrix{plan.rows, plan.cols, 4, 64, codes, scales, biases};
    return linear;
}

const float* fill_norm(uint8_t* base, size_t offset, int64_t n, uint64_t& state) {
    auto* w = reinterpret_cast<float*>(base + offset);
    for (int64_t i = 0; i < n; ++i) w[i] = 1.0F + 0.25F * uniform(state);
    return w;
}

TestLayer make_layer(const q4::Config& c, const Shape& s, uint64_t seed) {
    const int64_t h = c.hidden_size;
    const int64_t d = c.head_dim;
    const int64_t kv = c.num_key_value_heads * d;
    Layout layout;
    const AffinePlan q = plan_affine(layout, c.num_attention_heads * 2 * d, h);
    const AffinePlan k = plan_affine(layout, kv, h);
    const AffinePlan v = plan_affine(layout, kv, h);
    AffinePlan o;
    size_t o_identity = 0;
    if (s.identity_o) {
        o_identity = layout.take(static_cast<size_t>(h * h) * sizeof(float));
    } else {
        o = plan_affine(layout, h, c.num_attention_heads * d);
    }
    const size_t q_norm = layout.take(static_cast<size_t>(d) * sizeof(float));
    const size_t k_norm = layout.take(static_cast<size_t>(d) * sizeof(float));
    AffinePlan index_qk;
    size_t index_q_norm = 0;
    size_t index_k_norm = 0;
    if (s.indexer) {
        index_qk = plan_affine(layout, (s.n_index_heads + 1) * s.index_dim, h);
        index_q_norm = layout.take(static_cast<size_t>(s.index_dim) * sizeof(float));
        index_k_norm = layout.take(static_cast<size_t>(s.index_dim) * sizeof(float));
    }

    TestLayer layer;
    layer.storage.assign(layout.size() / sizeof(uint64_t), 0);
    auto* base = reinterpret_cast<uint8_t*>(layer.storage.data());
    uint64_t state = seed;
    SparseAttentionWeights& w = layer.weights;
    w.q = fill_affine(base, q, state);
    w.k = fill_affine(base, k, state);
    w.v = fill_affine(base, v, state);
    if (s.identity_o) {
        auto* identity = reinterpret_cast<float*>(base + o_identity);
        for (int64_t i = 0; i < h; ++i) identity[i * h + i] = 1.0F;
        w.o.quantized = false;
        w.o.dense = F32Matrix{h, h, identity};
    } else {
        w.o = fill_affine(base, o, state);
    }
    w.q_norm = fill_norm(base, q_norm, d, state);
    w.k_norm = fill_norm(base, k_norm, d, state);
    w.has_indexer = s.indexer;
    if (s.indexer) {
        w.index_qk = fill_affine(base, index_qk, state);
        w.index_q_norm = fill_norm(base, index_q_norm, s.index_dim, state);
        w.index_k_norm = fill_norm(base, index_k_norm, s.index_dim, state);
    }
    std::vector<float> row(static_cast<size_t>(w.o.in_features()));
    for (int64_t r = 0; r < h; ++r) {
        w.o.row(r, row.data());
        double sum = 0.0;
        for (const float x : row) sum += static_cast<double>(x) * x;
        layer.o_row_norm.push_back(std::sqrt(sum));
    }
    return layer;
}

std::vector<float> random_rows(int64_t n_rows, int64_t width, uint64_t seed) {
    uint64_t state = seed;
    std::vector<float> x(static_cast<size_t>(n_rows * width));
    for (float& v : x) v = uniform(state);
    return x;
}

// The device layer driven from the host: the weights uploaded once, a device cache of `capacity`
// tokens kept between calls, outputs and cache contents copied back. `config` and `layer` must
// outlive it.
class DeviceQsa {
public:
    DeviceQsa(const q4::Config& config, const TestLayer& layer, int64_t capacity)
        : config_(&config), weight_bytes_(layer.n_bytes()) {
        weight_bytes_.upload(layer.base(), layer.n_bytes());
        const void* device_base = weight_bytes_.data();
        const auto linear = [&](const Linear& l) {
            return translate_linear(l, layer.base(), layer.n_bytes(), device_base);
        };
        const auto norm = [&](const float* host) {
            if (host == nullptr) return static_cast<const float*>(nullptr);
            const auto offset =
                reinterpret_cast<const char*>(host) - static_cast<const char*>(layer.base());
            return reinterpret_cast<const float*>(static_cast<const char*>(device_base) + offset);
        };
        const SparseAttentionWeights& w = layer.weights;
        weights_.q = linear(w.q);
        weights_.k = linear(w.k);
        weights_.v = linear(w.v);
        weights_.o = linear(w.o);
        weights_.q_norm = norm(w.q_norm);
        weights_.k_norm = norm(w.k_norm);
        weights_.has_indexer = w.has_indexer;
        if (w.has_indexer) {
            weights_.index_qk = linear(w.index_qk);
            weights_.index_q_norm = norm(w.index_q_norm);
            weights_.index_k_norm = norm(w.index_k_norm);
        }

        const auto kv_floats =
            static_cast<size_t>(capacity * config.num_key_value_heads * config.head_dim);
        cache_.capacity = capacity;
        keys_ = DeviceBuffer(kv_floats * sizeof(float));
        values_ = DeviceBuffer(kv_floats * sizeof(float));
        cache_.keys = keys_.as<float>();
        cache_.values = values_.as<float>();
        if (w.has_indexer) {
            const auto& ix = *config.indexer;
            index_keys_ = DeviceBuffer(static_cast<size_t>(capacity * ix.head_dim) * sizeof(float));
            block_keys_ =
                DeviceBuffer(static_cast<size_t>(
                                 std::max<int64_t>(1, capacity / ix.compress_ratio) * ix.head_dim) *
                             sizeof(float));
            cache_.index_keys = index_keys_.as<float>();
            cache_.block_keys = block_keys_.as<float>();
        }
        // engine::Rope's table, computed the same way (docs/qwen4_exp.md §1.5).
        std::vector<float> inv_freq;
        const auto theta = static_cast<float>(config.rope.rope_theta);
        for (int64_t i = 0; i < config.rotary_dim / 2; ++i) {
            const float exponent =
                static_cast<float>(2 * i) / static_cast<float>(config.rotary_dim);
            inv_freq.push_back(1.0F / std::pow(theta, exponent));
        }
        inv_freq_ = ops_test::to_device(inv_freq);
    }

    // y [T, H] of the device layer for mix [T, H] at positions [first_position, +T); the cache
    // grows by T. `trace` (may be null) receives the layer's trace values ("qsa.margin", ...).
    // Throws what the device function throws (Internal when first_position is not the length).
    std::vector<float> forward(const float* mix, int64_t n_rows, int64_t first_position,
                               ForwardTrace* trace) {
        const auto width = static_cast<size_t>(n_rows * config_->hidden_size);
        DeviceBuffer d_mix(std::max<size_t>(1, width) * sizeof(float));
        d_mix.upload(mix, width * sizeof(float));
        DeviceBuffer d_y(std::max<size_t>(1, width) * sizeof(float));
        DeviceBuffer d_position(sizeof(int64_t));
        d_position.upload(&first_position, sizeof(int64_t));
        DeviceContext ctx;
        ctx.config = config_;
        ctx.stream = stream_.get();
        ctx.rope_inv_freq = inv_freq_.as<float>();
        ctx.trace = trace;
        ctx.position = d_position.as<int64_t>();
        sparse_attention_forward(weights_, cache_, d_mix.as<float>(), n_rows, first_position,
                                 d_y.as<float>(), ctx);
        stream_.synchronize();
        return ops_test::to_host(d_y, width);
    }

    // DeviceAttentionCache::truncate.
    void truncate(int64_t n) {
        cache_.truncate(n, weights_.has_indexer ? config_->indexer->compress_ratio : 0);
    }

    // The valid part of the device cache as an engine::AttentionCache.
    AttentionCache download_cache() const {
        stream_.synchronize();
        AttentionCache out;
        out.length = cache_.length;
        out.n_block_keys = cache_.n_block_keys;
        out.kv_width = config_->num_key_value_heads * config_->head_dim;
        out.keys = ops_test::to_host(keys_, static_cast<size_t>(out.length * out.kv_width));
        out.values = ops_test::to_host(values_, out.keys.size());
        if (weights_.has_indexer) {
            out.index_width = config_->indexer->head_dim;
            out.index_keys =
                ops_test::to_host(index_keys_, static_cast<size_t>(out.length * out.index_width));
            out.block_keys = ops_test::to_host(
                block_keys_, static_cast<size_t>(out.n_block_keys * out.index_width));
        }
        return out;
    }

private:
    const q4::Config* config_;
    DeviceBuffer weight_bytes_;
    DeviceSparseAttentionWeights weights_;
    DeviceBuffer keys_, values_, index_keys_, block_keys_, inv_freq_;
    DeviceAttentionCache cache_;
    ops_test::TestStream stream_;
};

void expect_near_all(const std::vector<float>& gpu, const std::vector<float>& cpu,
                     const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const double bound = kCacheTolerance * (1.0 + std::fabs(cpu[i]));
        ASSERT_LE(std::fabs(static_cast<double>(gpu[i]) - cpu[i]), bound)
            << what << " [" << i << "] gpu=" << gpu[i] << " cpu=" << cpu[i];
    }
}

void expect_same_cache(const AttentionCache& gpu, const AttentionCache& cpu,
                       const std::string& what) {
    ASSERT_EQ(gpu.length, cpu.length) << what;
    ASSERT_EQ(gpu.n_block_keys, cpu.n_block_keys) << what;
    expect_near_all(gpu.keys, cpu.keys, what + " keys");
    expect_near_all(gpu.values, cpu.values, what + " values");
    expect_near_all(gpu.index_keys, cpu.index_keys, what + " index_keys");
    std::vector<float> cpu_blocks(cpu.block_keys.begin(),
                                  cpu.block_keys.begin() + cpu.n_block_keys * cpu.index_width);
    expect_near_all(gpu.block_keys, cpu_blocks, what + " block_keys");
}

// The CPU layer and its cache next to the GPU handle, fed the same rows.
class Pair {
public:
    Pair(const Shape& shape, int64_t capacity, uint64_t seed)
        : shape_(shape),
          config_(make_config(shape)),
          layer_(make_layer(config_, shape, seed)),
          rope_(config_.rope.rope_theta, config_.rotary_dim),
          gpu_(config_, layer_, capacity) {
        cpu_cache_.kv_width = config_.num_key_value_heads * config_.head_dim;
        cpu_cache_.index_width = shape.indexer ? shape.index_dim : 0;
    }

    // Runs both on rows [first, first + n_rows) of `mix` and compares outputs, traces and
    // caches. Returns the number of rows whose outputs were compared (near ties are skipped).
    int64_t step(const std::vector<float>& mix, int64_t first, int64_t n_rows,
                 const std::string& what) {
        const int64_t h = config_.hidden_size;
        const float* x = mix.data() + first * h;
        std::vector<float> cpu_y(static_cast<size_t>(n_rows * h));
        ForwardTrace cpu_trace;
        LayerContext ctx;
        ctx.config = &config_;
        ctx.pool = &pool_;
        ctx.rope = &rope_;
        ctx.trace = &cpu_trace;
        engine::sparse_attention_forward(layer_.weights, cpu_cache_, x, n_rows, first, cpu_y.data(),
                                         ctx);
        ForwardTrace gpu_trace;
        const std::vector<float> gpu_y = gpu_.forward(x, n_rows, first, &gpu_trace);

        const std::vector<float>& cpu_margin = cpu_trace.tensors["qsa.margin"];
        const std::vector<float>& gpu_margin = gpu_trace.tensors["qsa.margin"];
        EXPECT_EQ(gpu_margin.size(), static_cast<size_t>(n_rows)) << what;
        if (shape_.indexer) {
            EXPECT_EQ(gpu_trace.tensors["qsa.selected_blocks"].size(),
                      static_cast<size_t>(n_rows * shape_.top))
                << what;
        }
        double v_max = 0.0;
        for (const float v : cpu_cache_.values) v_max = std::max(v_max, std::fabs(double{v}));
        int64_t compared = 0;
        for (int64_t t = 0; t < n_rows && !::testing::Test::HasFailure(); ++t) {
            const float margin = cpu_margin[static_cast<size_t>(t)];
            // An exact tie (margin 0) is between relu-zero scores, which both sides compute
            // exactly: those rows check the tie-break to the smaller block index.
            if (margin < kMinMargin && margin != 0.0F) continue;
            ++compared;
            const std::string row = what + " row " + std::to_string(t) + " (position " +
                                    std::to_string(first + t) + ")";
            if (std::isinf(margin)) {
                EXPECT_TRUE(std::isinf(gpu_margin[static_cast<size_t>(t)])) << row;
            } else {
                EXPECT_NEAR(gpu_margin[static_cast<size_t>(t)], margin,
                            1e-3 * (1.0 + std::fabs(margin)))
                    << row;
            }
            if (shape_.indexer) {
                for (int64_t i = 0; i < shape_.top; ++i) {
                    const size_t at = static_cast<size_t>(t * shape_.top + i);
                    EXPECT_EQ(gpu_trace.tensors["qsa.selected_blocks"][at],
                              cpu_trace.tensors["qsa.selected_blocks"][at])
                        << row << " selection " << i;
                }
            }
            for (int64_t r = 0; r < h; ++r) {
                const size_t at = static_cast<size_t>(t * h + r);
                const double bound =
                    kOutputTolerance * layer_.o_row_norm[static_cast<size_t>(r)] * v_max + 1e-6;
                const double diff = std::fabs(static_cast<double>(gpu_y[at]) - cpu_y[at]);
                EXPECT_LE(diff, bound)
                    << row << " y[" << r << "] gpu=" << gpu_y[at] << " cpu=" << cpu_y[at];
                if (diff > bound) break;
            }
        }
        expect_same_cache(gpu_.download_cache(), cpu_cache_, what);
        return compared;
    }

    void truncate(int64_t n) {
        gpu_.truncate(n);
        cpu_cache_.truncate(n, shape_.indexer ? shape_.ratio : 0);
    }

    DeviceQsa& gpu() { return gpu_; }

private:
    Shape shape_;
    q4::Config config_;
    TestLayer layer_;
    Rope rope_;
    ThreadPool pool_{0};
    AttentionCache cpu_cache_;
    DeviceQsa gpu_;
};

class OpsVsCpuSparseAttention : public DeviceTest {
protected:
    // Prefill `chunks` in turn, comparing after each call; returns the rows compared.
    static int64_t run_chunks(Pair& pair, const std::vector<float>& mix,
                              const std::vector<int64_t>& chunks, const std::string& what) {
        int64_t position = 0;
        int64_t compared = 0;
        for (const int64_t n_rows : chunks) {
            compared += pair.step(mix, position, n_rows,
                                  what + " call of " + std::to_string(n_rows) + " rows at " +
                                      std::to_string(position));
            if (::testing::Test::HasFailure()) return compared;
            position += n_rows;
        }
        return compared;
    }
};

// Prefill 256 + 37 rows (sparse from position 35 on: 9 complete blocks > K 8), then decode 1
// and 3 rows at ~300 tokens of context.
TEST_F(OpsVsCpuSparseAttention, MatchesCpuOnFlashShape) {
    Pair pair(kFlash, 512, 11);
    const std::vector<int64_t> chunks = {256, 37, 1, 3};
    const auto mix = random_rows(297, kFlash.hidden, 5);
    const int64_t compared = run_chunks(pair, mix, chunks, "flash");
    EXPECT_GE(compared, 297 * 8 / 10) << "too many near-tie rows skipped";
}

TEST_F(OpsVsCpuSparseAttention, MatchesCpuOnSmallOddShape) {
    Pair pair(kSmall, 400, 12);
    const std::vector<int64_t> chunks = {37, 256, 1, 3, 1};
    const auto mix = random_rows(298, kSmall.hidden, 6);
    const int64_t compared = run_chunks(pair, mix, chunks, "small");
    EXPECT_GE(compared, 298 * 8 / 10) << "too many near-tie rows skipped";
}

// Plain causal attention; the last decode attends 601 tokens in 3 split-K chunks.
TEST_F(OpsVsCpuSparseAttention, MatchesCpuWithoutIndexer) {
    Pair pair(kNoIndexer, 700, 13);
    const std::vector<int64_t> chunks = {37, 1, 3, 560, 1};
    const auto mix = random_rows(602, kNoIndexer.hidden, 7);
    EXPECT_EQ(run_chunks(pair, mix, chunks, "no indexer"), 602);
}

// Truncating inside a block (dropping a completed block key) and appending other rows gives what
// a run that never saw the dropped rows gives.
TEST_F(OpsVsCpuSparseAttention, TruncateThenAppendMatchesAFreshRun) {
    for (const Shape& shape : {kSmall, kNoIndexer}) {
        Pair pair(shape, 400, 21);
        const auto first = random_rows(300, shape.hidden, 8);
        run_chunks(pair, first, {256, 37, 1}, "before truncation");
        ASSERT_FALSE(HasFailure());
        pair.truncate(290);  // 293 / 3 = 97 blocks → 96
        // The fresh run's rows: the first 290, then 10 others.
        std::vector<float> mix = first;
        const auto other = random_rows(10, shape.hidden, 9);
        std::copy(other.begin(), other.end(), mix.begin() + 290 * shape.hidden);
        pair.step(mix, 290, 4, "re-append of 4 rows at 290");
        pair.step(mix, 294, 1, "decode at 294");
        ASSERT_FALSE(HasFailure());

        Pair fresh(shape, 400, 21);
        run_chunks(fresh, mix, {256, 34, 4, 1}, "fresh");
        const AttentionCache a = pair.gpu().download_cache();
        const AttentionCache b = fresh.gpu().download_cache();
        expect_same_cache(a, b, "truncated vs fresh");
    }
}

TEST_F(OpsVsCpuSparseAttention, RejectsAPositionOtherThanTheLengthAndRowsPastCapacity) {
    Pair pair(kSmall, 40, 3);
    const auto mix = random_rows(41, kSmall.hidden, 4);
    EXPECT_THROW(pair.gpu().forward(mix.data(), 1, 5, nullptr), Error);
    EXPECT_THROW(pair.gpu().forward(mix.data(), 41, 0, nullptr), Error);
    EXPECT_EQ(pair.gpu().download_cache().length, 0);
    pair.step(mix, 0, 40, "filling the capacity");
    EXPECT_THROW(pair.gpu().forward(mix.data(), 1, 40, nullptr), Error);
}

}  // namespace
}  // namespace cherenkov::engine::cuda
