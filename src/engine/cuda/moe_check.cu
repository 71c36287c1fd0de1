// MoeCheck (moe_check.h): the host-side harness around the device MoE block.
#include <cuda_runtime.h>

#include <string>

#include "base/error.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/moe_check.h"

namespace cherenkov::engine::cuda {

struct MoeCheck::Impl {
    const ModelWeights* weights = nullptr;
    ExpertSource* experts = nullptr;
    cudaStream_t stream = nullptr;
    DeviceBuffer dense;                 // a copy of dense.bin
    std::vector<DeviceMoeWeights> moe;  // [n_layers]
    std::unique_ptr<DeviceExpertPool> pool;

    ~Impl() {
        pool.reset();  // before the stream it fences on
        if (stream != nullptr) {
            cudaStreamSynchronize(stream);
            cudaStreamDestroy(stream);
        }
    }
};

MoeCheck::MoeCheck(const ModelWeights& weights, ExpertSource& experts, int64_t pool_slots)
    : impl_(std::make_unique<Impl>()) {
    impl_->weights = &weights;
    impl_->experts = &experts;
    CHERENKOV_CUDA_CHECK(cudaStreamCreate(&impl_->stream));
    const std::span<const std::byte> bytes = weights.dense_file->bytes();
    impl_->dense = DeviceBuffer(bytes.size());
    impl_->dense.upload(bytes.data(), bytes.size());
    const auto translate = [&](const Linear& linear) {
        return translate_linear(linear, bytes.data(), bytes.size(), impl_->dense.data());
    };
    for (const LayerWeights& layer : weights.layers) {
        DeviceMoeWeights m;
        m.router = translate(layer.moe.router);
        m.shared_gate = translate(layer.moe.shared_gate);
        m.shared_up = translate(layer.moe.shared_up);
        m.shared_down = translate(layer.moe.shared_down);
        m.shared_expert_gate = translate(layer.moe.shared_expert_gate);
        m.table_layer = layer.moe.table_layer;
        impl_->moe.push_back(m);
    }
    impl_->pool = std::make_unique<DeviceExpertPool>(experts.layout(), pool_slots, impl_->stream);
}

MoeCheck::~MoeCheck() = default;

std::vector<float> MoeCheck::run(int64_t layer, const std::vector<float>& mix, int64_t n_rows,
                                 bool lookahead, ForwardTrace* trace, std::ostream* routing_trace,
                                 int64_t trace_step) {
    const auto& config = impl_->weights->config;
    const auto n_layers = static_cast<int64_t>(impl_->moe.size());
    if (layer < 0 || layer >= n_layers) {
        throw_invalid("[moe_check] layer " + std::to_string(layer) + " of " +
                      std::to_string(n_layers));
    }
    const size_t n = static_cast<size_t>(n_rows * config.hidden_size);
    if (mix.size() != n) throw_invalid("[moe_check] mix holds " + std::to_string(mix.size()));
    DeviceBuffer d_mix(n * sizeof(float));
    d_mix.upload(mix.data(), n * sizeof(float));
    DeviceBuffer d_y(n * sizeof(float));
    d_y.fill(0xFF);

    DeviceContext ctx;
    ctx.config = &config;
    ctx.stream = impl_->stream;
    ctx.experts = impl_->experts;
    ctx.expert_pool = impl_->pool.get();
    ctx.trace = trace;
    ctx.trace_prefix = "layers." + std::to_string(layer) + ".";
    ctx.routing_trace = routing_trace;
    ctx.trace_step = trace_step;
    const DeviceMoeWeights* next =
        lookahead && layer + 1 < n_layers ? &impl_->moe[static_cast<size_t>(layer + 1)] : nullptr;
    moe_forward(impl_->moe[static_cast<size_t>(layer)], next, d_mix.as<const float>(), n_rows,
                d_y.as<float>(), ctx);
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
    std::vector<float> y(n);
    d_y.download(y.data(), n * sizeof(float));
    return y;
}

const DeviceExpertPool& MoeCheck::pool() const {
    return *impl_->pool;
}

}  // namespace cherenkov::engine::cuda
