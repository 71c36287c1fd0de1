// The op-vs-CPU harness for Gated DeltaNet (ops_vs_cpu.h): cuda::gated_deltanet_forward
// (gated_deltanet.cu, the decode step, and delta_rule_chunked.cu, the chunked prefill) against
// the CPU layer engine::gated_deltanet_forward on random Q4 weights and random states: the output,
// the final recurrent and conv states and the per-row snapshots, on the Flash shape and small odd
// shapes for 1, 3 and 37 rows, and one call of 5 rows against calls of 2 and 3 rows. Calls of 16
// rows or more without snapshots take the chunked recurrence: it is checked against the CPU for
// 1-300 rows, against the device's token-by-token kernel (same projections, so only the
// recurrence differs), across calls that switch between the two, and for identical bits run to
// run. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/affine_test_matrix.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_test.h"
#include "engine/cuda/ops_vs_cpu.h"
#include "engine/model/layers.h"

namespace cherenkov::engine::cuda {
namespace {

using model_data::qwen4_exp::Config;
using model_data::qwen4_exp::GateActivation;

// |gpu − cpu| ≤ kTolerance·(rms(cpu) + |cpu|) per element of each compared tensor. Both sides
// compute in float32 in different orders (GEMV partial sums, the dk reductions of the recurrence
// in 8 partial sums); those roundings stay around 1e-5 of the tensor's scale through the layer,
// while an indexing or formula bug is off by O(1) of it.
constexpr double kTolerance = 1e-3;

struct Shape {
    const char* name;
    int64_t hidden;
    int64_t key_heads;    // Hk
    int64_t value_heads;  // Hv
    int64_t dk;
    int64_t dv;
    int64_t taps;  // Kc
    GateActivation gate;
};

// Flash: H 2560, 16 key heads, 48 value heads × 128, conv 4, sigmoid gate. The small shapes
// leave recurrence lanes idle (dv 48, 80: partial 32-column tiles) and use the other gate and
// conv width.
constexpr Shape kFlash{"flash", 2560, 16, 48, 128, 128, 4, GateActivation::Sigmoid};
constexpr Shape kSmallSilu{"small_silu", 128, 2, 4, 32, 48, 3, GateActivation::Silu};
constexpr Shape kSmallSigmoid{"small_sigmoid", 192, 1, 4, 64, 80, 4, GateActivation::Sigmoid};

Config make_config(const Shape& shape) {
    Config c;
    c.hidden_size = shape.hidden;
    c.linear_num_key_heads = shape.key_heads;
    c.linear_num_value_heads = shape.value_heads;
    c.linear_key_head_dim = shape.dk;
    c.linear_value_head_dim = shape.dv;
    c.linear_conv_kernel_dim = shape.taps;
    c.rms_norm_eps = 1e-6;
    c.output_gate = shape.gate;
    // §1.4 derived values, as parse_config fills them.
    c.key_dim = shape.key_heads * shape.dk;
    c.value_dim = shape.value_heads * shape.dv;
    c.conv_dim = 2 * c.key_dim + c.value_dim;
    c.gdn_head_ratio = shape.value_heads / shape.key_heads;
    return c;
}

using affine_test::splitmix;
using affine_test::uniform;

std::vector<float> random_vector(size_t n, float scale, uint64_t seed) {
    uint64_t state = seed;
    std::vector<float> values(n);
    for (float& v : values) v = scale * uniform(state);
    return values;
}

constexpr int kBits = 4;
constexpr int kGroupSize = 64;
constexpr size_t kAlign = 256;

// One host allocation holding every weight tensor at 256-byte offsets, uploaded as a whole (the
// device copy then keeps codes 16-byte aligned, as dense.bin does).
class WeightBuffer {
public:
    explicit WeightBuffer(size_t capacity) : bytes_(capacity) {}

    template <typename T>
    T* take(size_t n) {
        const size_t at = used_;
        used_ = (at + n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
        if (used_ > bytes_.size()) throw_internal("test weight buffer too small");
        return reinterpret_cast<T*>(bytes_.data() + at);
    }
    const void* data() const { return bytes_.data(); }
    uint64_t size() const { return bytes_.size(); }

private:
    std::vector<uint8_t> bytes_;
    size_t used_ = 0;
};

size_t linear_bytes(int64_t rows, int64_t cols) {
    const auto codes = static_cast<size_t>(rows * cols * kBits / 8);
    const auto groups = static_cast<size_t>(rows * (cols / kGroupSize));
    return codes + 4 * groups + 3 * kAlign;
}

// A random Q4 g64 matrix [rows, cols]: codes uniform, scale ±s and bias −7.5·s (+ noise) per
// group, so w is roughly uniform in ±7.5·s with s chosen for outputs of size ~0.6 from inputs
// uniform in ±1.
Linear make_linear(WeightBuffer& buffer, int64_t rows, int64_t cols, uint64_t seed) {
    uint64_t state = seed * 0x100000001B3ULL + 1;
    const auto n_codes = static_cast<size_t>(rows * cols * kBits / 8);
    const auto n_groups = static_cast<size_t>(rows * (cols / kGroupSize));
    auto* codes = buffer.take<uint8_t>(n_codes);
    auto* scales = buffer.take<uint16_t>(n_groups);
    auto* biases = buffer.take<uint16_t>(n_groups);
    for (size_t i = 0; i < n_codes; ++i) codes[i] = static_cast<uint8_t>(splitmix(state));
    const float s = 0.23F / std::sqrt(static_cast<float>(cols));
    for (size_t g = 0; g < n_groups; ++g) {
        const float scale =
            s * (1.0F + 0.3F * uniform(state)) * (uniform(state) < 0.0F ? -1.0F : 1.0F);
        scales[g] = float_to_bf16(scale);
        biases[g] = float_to_bf16(-7.5F * scale + 0.1F * s * uniform(state));
    }
    Linear linear;
    linear.quantized = true;
    linear.affine = AffineMatrix{rows, cols, kBits, kGroupSize, codes, scales, biases};
    return linear;
}

struct TestLayer {
    Config config;
    WeightBuffer buffer;
    GatedDeltaNetWeights weights;
    GatedDeltaNetState initial;
};

float* fill_floats(WeightBuffer& buffer, const std::vector<float>& values) {
    float* out = buffer.take<float>(values.size());
    std::copy(values.begin(), values.end(), out);
    return out;
}

size_t weight_capacity(const Config& c) {
    const int64_t h = c.hidden_size;
    const int64_t hv = c.linear_num_value_heads;
    return linear_bytes(c.conv_dim, h) + linear_bytes(c.value_dim, h) + 2 * linear_bytes(hv, h) +
           linear_bytes(h, c.value_dim) +
           4 * static_cast<size_t>(c.conv_dim * c.linear_conv_kernel_dim + 3 * hv +
                                   c.linear_value_head_dim) +
           4 * kAlign;
}

TestLayer make_layer(const Shape& shape, uint64_t seed) {
    const Config c = make_config(shape);
    TestLayer layer{c, WeightBuffer(weight_capacity(c)), {}, {}};
    const int64_t h = c.hidden_size;
    const int64_t hv = c.linear_num_value_heads;
    WeightBuffer& buffer = layer.buffer;
    GatedDeltaNetWeights& w = layer.weights;
    w.in_qkv = make_linear(buffer, c.conv_dim, h, seed + 1);
    w.in_z = make_linear(buffer, c.value_dim, h, seed + 2);
    w.in_b = make_linear(buffer, hv, h, seed + 3);
    w.in_a = make_linear(buffer, hv, h, seed + 4);
    w.out = make_linear(buffer, h, c.value_dim, seed + 5);
    w.conv = fill_floats(
        buffer,
        random_vector(static_cast<size_t>(c.conv_dim * c.linear_conv_kernel_dim), 0.7F, seed + 6));
    // dt_bias uniform in [-6, 0] (per-row decays g = exp(-exp(a_log)·softplus(a + dt_bias)) from
    // ~0.99, a long memory as in trained models, down to ~0); a_log = log(uniform(1, 16)); the
    // norm weight around 1.
    std::vector<float> dt_bias = random_vector(static_cast<size_t>(hv), 3.0F, seed + 7);
    for (float& v : dt_bias) v -= 3.0F;
    w.dt_bias = fill_floats(buffer, dt_bias);
    std::vector<float> a_log = random_vector(static_cast<size_t>(hv), 1.0F, seed + 8);
    for (float& v : a_log) v = std::log(1.0F + 7.5F * (v + 1.0F));
    w.a_log = fill_floats(buffer, a_log);
    std::vector<float> norm =
        random_vector(static_cast<size_t>(c.linear_value_head_dim), 0.5F, seed + 9);
    for (float& v : norm) v += 1.0F;
    w.norm = fill_floats(buffer, norm);

    layer.initial.conv = random_vector(
        static_cast<size_t>((c.linear_conv_kernel_dim - 1) * c.conv_dim), 1.0F, seed + 10);
    layer.initial.recurrent = random_vector(
        static_cast<size_t>(hv * c.linear_key_head_dim * c.linear_value_head_dim), 0.5F, seed + 11);
    return layer;
}

struct Result {
    std::vector<float> y;
    GatedDeltaNetState state;
    std::vector<float> recurrent_snapshots;  // [T, Hv·dk·dv] (empty without snapshots)
    std::vector<float> conv_snapshots;       // [T, (Kc-1)·conv_dim]
};

Result run_cpu(const TestLayer& layer, const std::vector<float>& mix, int64_t n_rows,
               bool snapshots, ThreadPool* pool) {
    Result r;
    r.state = layer.initial;
    r.y.resize(static_cast<size_t>(n_rows * layer.config.hidden_size));
    std::vector<RowSnapshot> rows;
    LayerContext ctx;
    ctx.config = &layer.config;
    ctx.pool = pool;
    ctx.layer_index = 0;
    if (snapshots) {
        rows.resize(static_cast<size_t>(n_rows));
        for (RowSnapshot& snap : rows) {
            snap.gdn.resize(1);
            snap.gdn[0].recurrent.resize(layer.initial.recurrent.size());
        }
        ctx.snapshots = &rows;
    }
    engine::gated_deltanet_forward(layer.weights, r.state, mix.data(), n_rows, r.y.data(), ctx);
    for (const RowSnapshot& snap : rows) {
        const GatedDeltaNetState& s = snap.gdn[0];
        r.recurrent_snapshots.insert(r.recurrent_snapshots.end(), s.recurrent.begin(),
                                     s.recurrent.end());
        r.conv_snapshots.insert(r.conv_snapshots.end(), s.conv.begin(), s.conv.end());
    }
    return r;
}

// The device address of a float tensor inside the host weight buffer, once that buffer is
// uploaded at `device_base`.
const float* device_floats(const float* host, const WeightBuffer& buffer, const void* device_base) {
    if (host == nullptr) return nullptr;
    const auto offset =
        reinterpret_cast<const char*>(host) - static_cast<const char*>(buffer.data());
    return reinterpret_cast<const float*>(static_cast<const char*>(device_base) + offset);
}

// Runs cuda::gated_deltanet_forward once per entry of `chunks` (consecutive calls on one device
// state and one stream) over mix [Σ chunks, H], from the layer's initial state.
Result run_gpu(const TestLayer& layer, const std::vector<float>& mix,
               const std::vector<int64_t>& chunks, bool snapshots) {
    int64_t n_rows = 0;
    for (const int64_t rows : chunks) n_rows += rows;
    const Config& c = layer.config;
    const int64_t hidden = c.hidden_size;
    const auto recurrent_size = static_cast<int64_t>(layer.initial.recurrent.size());
    const auto conv_size = static_cast<int64_t>(layer.initial.conv.size());

    DeviceBuffer d_weights(layer.buffer.size());
    d_weights.upload(layer.buffer.data(), layer.buffer.size());
    const void* base = d_weights.data();
    const auto linear = [&](const Linear& l) {
        return translate_linear(l, layer.buffer.data(), layer.buffer.size(), base);
    };
    const GatedDeltaNetWeights& w = layer.weights;
    DeviceGatedDeltaNetWeights dw;
    dw.in_qkv = linear(w.in_qkv);
    dw.in_z = linear(w.in_z);
    dw.in_b = linear(w.in_b);
    dw.in_a = linear(w.in_a);
    dw.out = linear(w.out);
    dw.conv = device_floats(w.conv, layer.buffer, base);
    dw.dt_bias = device_floats(w.dt_bias, layer.buffer, base);
    dw.a_log = device_floats(w.a_log, layer.buffer, base);
    dw.norm = device_floats(w.norm, layer.buffer, base);

    const DeviceBuffer d_mix = ops_test::to_device(mix);
    const DeviceBuffer d_y = ops_test::poisoned(static_cast<size_t>(n_rows * hidden));
    const DeviceBuffer d_recurrent = ops_test::to_device(layer.initial.recurrent);
    const DeviceBuffer d_conv = ops_test::to_device(layer.initial.conv);
    const DeviceBuffer d_recurrent_snaps =
        ops_test::poisoned(snapshots ? static_cast<size_t>(n_rows * recurrent_size) : 0);
    const DeviceBuffer d_conv_snaps =
        ops_test::poisoned(snapshots ? static_cast<size_t>(n_rows * conv_size) : 0);
    // Pageable uploads may still be in flight on the legacy stream; the test stream does not wait
    // for it.
    device_synchronize();

    const ops_test::TestStream stream;
    DeviceGatedDeltaNetState device_state{d_conv.as<float>(), d_recurrent.as<float>()};
    DeviceContext ctx;
    ctx.config = &c;
    ctx.stream = stream.get();
    int64_t done = 0;
    for (const int64_t rows : chunks) {
        ctx.gdn_recurrent_snapshots =
            snapshots ? d_recurrent_snaps.as<float>() + done * recurrent_size : nullptr;
        ctx.gdn_conv_snapshots = snapshots ? d_conv_snaps.as<float>() + done * conv_size : nullptr;
        gated_deltanet_forward(dw, device_state, d_mix.as<float>() + done * hidden, rows,
                               d_y.as<float>() + done * hidden, ctx);
        done += rows;
    }
    stream.synchronize();

    Result r;
    r.y = ops_test::to_host(d_y, static_cast<size_t>(n_rows * hidden));
    r.state.recurrent = ops_test::to_host(d_recurrent, static_cast<size_t>(recurrent_size));
    r.state.conv = ops_test::to_host(d_conv, static_cast<size_t>(conv_size));
    if (snapshots) {
        r.recurrent_snapshots =
            ops_test::to_host(d_recurrent_snaps, static_cast<size_t>(n_rows * recurrent_size));
        r.conv_snapshots = ops_test::to_host(d_conv_snaps, static_cast<size_t>(n_rows * conv_size));
    }
    return r;
}

// Checks every element against `tolerance`; returns max |gpu − cpu| / rms(cpu).
double compare(const std::vector<float>& gpu, const std::vector<float>& cpu,
               const std::string& what, double tolerance = kTolerance) {
    EXPECT_EQ(gpu.size(), cpu.size()) << what;
    if (gpu.size() != cpu.size() || cpu.empty()) return 0.0;
    double sum_squares = 0.0;
    for (const float v : cpu) sum_squares += static_cast<double>(v) * v;
    const double rms = std::sqrt(sum_squares / static_cast<double>(cpu.size()));
    double worst = 0.0;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
        const double bound = tolerance * (rms + std::fabs(cpu[i]));
        if (!(diff <= bound)) {  // NaN fails too
            ADD_FAILURE() << what << ": element " << i << " gpu=" << gpu[i] << " cpu=" << cpu[i]
                          << " (rms " << rms << ")";
            return std::numeric_limits<double>::infinity();
        }
        worst = std::max(worst, diff / rms);
    }
    return worst;
}

// Bitwise equality, reporting the first differing element (EXPECT_EQ would print both vectors).
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
            ADD_FAILURE() << what << ": element " << i << " differs: " << a[i] << " vs " << b[i];
            return;
        }
    }
}

void compare_results(const Result& gpu, const Result& cpu, const std::string& what) {
    const double y = compare(gpu.y, cpu.y, what + " y");
    const double recurrent =
        compare(gpu.state.recurrent, cpu.state.recurrent, what + " recurrent state");
    const double conv = compare(gpu.state.conv, cpu.state.conv, what + " conv state");
    const double recurrent_snaps =
        compare(gpu.recurrent_snapshots, cpu.recurrent_snapshots, what + " recurrent snapshots");
    const double conv_snaps =
        compare(gpu.conv_snapshots, cpu.conv_snapshots, what + " conv snapshots");
    std::printf("%s: max |gpu-cpu|/rms: y %.3g, recurrent %.3g, conv %.3g, snapshots %.3g / %.3g\n",
                what.c_str(), y, recurrent, conv, recurrent_snaps, conv_snaps);
}

class OpsVsCpuGatedDeltaNet : public DeviceTest {
protected:
    // T = 1, 3 and 37 rows in one call each; snapshots at T = 3 (and at every T when asked).
    void check_shape(const Shape& shape, bool all_snapshots) {
        const TestLayer layer = make_layer(shape, 100);
        for (const int64_t n_rows : {int64_t{1}, int64_t{3}, int64_t{37}}) {
            const bool snapshots = all_snapshots || n_rows == 3;
            const auto mix = random_vector(static_cast<size_t>(n_rows * shape.hidden), 1.0F,
                                           static_cast<uint64_t>(7 + n_rows));
            const Result cpu = run_cpu(layer, mix, n_rows, snapshots, &pool_);
            const Result gpu = run_gpu(layer, mix, {n_rows}, snapshots);
            compare_results(gpu, cpu, std::string(shape.name) + " T=" + std::to_string(n_rows));
            if (HasFailure()) return;
        }
    }

    ThreadPool pool_{0};
};

TEST_F(OpsVsCpuGatedDeltaNet, MatchesCpuOnSmallShapes) {
    check_shape(kSmallSilu, true);
    if (HasFailure()) return;
    check_shape(kSmallSigmoid, true);
}

TEST_F(OpsVsCpuGatedDeltaNet, MatchesCpuOnFlashShape) {
    check_shape(kFlash, false);
}

// The state carries between calls: 5 rows in one call equal calls of 2 and 3 rows (snapshots
// included), and both match the CPU's 5 rows.
TEST_F(OpsVsCpuGatedDeltaNet, OneCallOfFiveRowsMatchesCallsOfTwoAndThree) {
    for (const Shape& shape : {kSmallSilu, kFlash}) {
        const TestLayer layer = make_layer(shape, 200);
        const auto mix = random_vector(static_cast<size_t>(5 * shape.hidden), 1.0F, 55);
        const Result cpu = run_cpu(layer, mix, 5, true, &pool_);
        const Result whole = run_gpu(layer, mix, {5}, true);
        const Result split = run_gpu(layer, mix, {2, 3}, true);
        compare_results(whole, cpu, std::string(shape.name) + " T=5");
        compare_results(split, cpu, std::string(shape.name) + " T=2+3");
        compare_results(split, whole, std::string(shape.name) + " T=2+3 vs T=5 on the device");
        if (HasFailure()) return;
    }
}

// Row counts for the chunked recurrence: both sides of the kMinChunkedRows switch (16), partial
// and whole 64-row chunks, and several chunks.
const int64_t kChunkedRows[] = {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 300};

// The chunked path against the CPU's token-by-token layer, with the random initial state of
// make_layer, on the Flash shape (dk = dv = 128, 16 key heads, 48 value heads).
TEST_F(OpsVsCpuGatedDeltaNet, ChunkedPrefillMatchesCpuOnFlashShape) {
    const TestLayer layer = make_layer(kFlash, 300);
    for (const int64_t n_rows : kChunkedRows) {
        const auto mix = random_vector(static_cast<size_t>(n_rows * kFlash.hidden), 1.0F,
                                       static_cast<uint64_t>(31 + n_rows));
        const Result cpu = run_cpu(layer, mix, n_rows, false, &pool_);
        const Result gpu = run_gpu(layer, mix, {n_rows}, false);
        compare_results(gpu, cpu, "flash chunked T=" + std::to_string(n_rows));
        if (HasFailure()) return;
    }
}

// Partial 32-column tiles (dv 48, 80), dk 32 and 64, one and two value heads per key head.
TEST_F(OpsVsCpuGatedDeltaNet, ChunkedPrefillMatchesCpuOnSmallShapes) {
    for (const Shape& shape : {kSmallSilu, kSmallSigmoid}) {
        const TestLayer layer = make_layer(shape, 400);
        for (const int64_t n_rows : {int64_t{16}, int64_t{64}, int64_t{65}, int64_t{150}}) {
            const auto mix = random_vector(static_cast<size_t>(n_rows * shape.hidden), 1.0F,
                                           static_cast<uint64_t>(41 + n_rows));
            const Result cpu = run_cpu(layer, mix, n_rows, false, &pool_);
            const Result gpu = run_gpu(layer, mix, {n_rows}, false);
            compare_results(gpu, cpu,
                            std::string(shape.name) + " chunked T=" + std::to_string(n_rows));
            if (HasFailure()) return;
        }
    }
}

// Asking for snapshots keeps a call on the token-by-token kernel, so on the same device inputs
// (the projections are the same bits) the two recurrences differ only by their rounding: about
// 1e-5 of the scale (the CPU prototype in tests/engine/model/delta_rule_chunked_test.cpp shows
// the same against the CPU recurrence), well inside 1e-4.
TEST_F(OpsVsCpuGatedDeltaNet, ChunkedRecurrenceMatchesTheTokenByTokenKernel) {
    constexpr double kRecurrenceTolerance = 1e-4;
    const TestLayer layer = make_layer(kFlash, 500);
    for (const int64_t n_rows : {int64_t{16}, int64_t{65}, int64_t{300}}) {
        const auto mix = random_vector(static_cast<size_t>(n_rows * kFlash.hidden), 1.0F,
                                       static_cast<uint64_t>(51 + n_rows));
        const Result sequential = run_gpu(layer, mix, {n_rows}, true);
        const Result chunked = run_gpu(layer, mix, {n_rows}, false);
        const std::string what = "flash T=" + std::to_string(n_rows) + " chunked vs token by token";
        const double y = compare(chunked.y, sequential.y, what + " y", kRecurrenceTolerance);
        const double recurrent = compare(chunked.state.recurrent, sequential.state.recurrent,
                                         what + " recurrent state", kRecurrenceTolerance);
        expect_same_bits(chunked.state.conv, sequential.state.conv, what + " conv state");
        std::printf("%s: max |chunked-sequential|/rms: y %.3g, recurrent %.3g\n", what.c_str(), y,
                    recurrent);
        if (HasFailure()) return;
    }
}

// The state carries across calls that switch recurrences: 300 rows as calls of 100 (chunked),
// 7 (token by token), 64 and 129 (chunked) match the CPU's single call.
TEST_F(OpsVsCpuGatedDeltaNet, ChunkedAndTokenByTokenCallsChainLikeOneCall) {
    for (const Shape& shape : {kSmallSigmoid, kFlash}) {
        const TestLayer layer = make_layer(shape, 600);
        const auto mix = random_vector(static_cast<size_t>(300 * shape.hidden), 1.0F, 66);
        const Result cpu = run_cpu(layer, mix, 300, false, &pool_);
        const Result gpu = run_gpu(layer, mix, {100, 7, 64, 129}, false);
        compare_results(gpu, cpu, std::string(shape.name) + " T=100+7+64+129");
        if (HasFailure()) return;
    }
}

// Fixed reduction orders and no atomics: the chunked path gives the same bits twice.
TEST_F(OpsVsCpuGatedDeltaNet, ChunkedPrefillRepeatsBitForBit) {
    const TestLayer layer = make_layer(kFlash, 700);
    const auto mix = random_vector(static_cast<size_t>(200 * kFlash.hidden), 1.0F, 77);
    const Result first = run_gpu(layer, mix, {200}, false);
    const Result second = run_gpu(layer, mix, {200}, false);
    expect_same_bits(first.y, second.y, "y");
    expect_same_bits(first.state.recurrent, second.state.recurrent, "recurrent state");
    expect_same_bits(first.state.conv, second.state.conv, "conv state");
}

}  // namespace
}  // namespace cherenkov::engine::cuda
