// The CUDA backend (cuda_model.h): the ops of engine/model/backend_ops.h on the device, which the
// one composition of the model (engine/model/composed_model.h) calls: device weights, device
// caches per sequence (DeviceSequence), the kernels of device_layers.cuh, the device expert pool,
// and CUDA graphs for the composition's capture regions. Kernels wait for the previous kernel
// before touching memory and are launched with launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <compare>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/host_staging.cuh"
#include "engine/cuda/kernel_policy.h"
#include "engine/cuda/token_select.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/pool_budget.h"
#include "engine/model/backend_ops.h"
#include "engine/model/composed_model.h"
#include "engine/model/ops.h"

namespace cherenkov::engine::cuda {
namespace {

namespace q4 = model_data::qwen4_exp;

// ---- kernels ----

// W[row][d], affine (any bit width) or float32. Offsets inside a row are 32-bit (an embedding row
// is the hidden size): with a 64-bit division per value the one-block kernel took 11.6-11.8 µs
// per token under ncu, now 9.1-10.5 (H200, 4-layer synthetic store).
__device__ __forceinline__ float embedding_value(const DeviceLinear& w, int64_t row, int64_t d) {
    if (!w.quantized) return w.dense[row * w.cols + d];
    const DeviceAffineMatrix& a = w.affine;
    const auto column = static_cast<uint32_t>(d);
    const auto row_bytes = static_cast<uint32_t>(a.cols) * static_cast<uint32_t>(a.bits) / 8;
    const uint8_t* codes = a.codes + row * static_cast<int64_t>(row_bytes);
    const uint32_t bit = column * static_cast<uint32_t>(a.bits);
    const uint32_t byte = bit >> 3;
    uint32_t word = codes[byte];
    if (byte + 1 < row_bytes) word |= static_cast<uint32_t>(codes[byte + 1]) << 8;
    const uint32_t q = (word >> (bit & 7)) & ((1U << a.bits) - 1U);
    const auto group_size = static_cast<uint32_t>(a.group_size);
    const auto groups = static_cast<uint32_t>(a.cols) / group_size;
    const int64_t g = row * static_cast<int64_t>(groups) + column / group_size;
    const float scale = __uint_as_float(static_cast<uint32_t>(a.scales[g]) << 16);
    const float bias = __uint_as_float(static_cast<uint32_t>(a.biases[g]) << 16);
    return scale * static_cast<float>(q) + bias;
}

__device__ __forceinline__ void store_embedding(float v, int64_t t, int64_t d, int64_t h,
                                                int64_t n_streams, float* out, float* first) {
    first[t * h + d] = v;
    for (int64_t s = 0; s < n_streams; ++s) out[(t * n_streams + s) * h + d] = v;
}

// out[t, s·H + d] = W[token_t][d] for every stream s (the embedding, replicated), and
// first[t, d] = the same row (the trace's "embed"). A row that fits a row slice is read whole
// before anything is stored (load_row_slice's reason).
__global__ void embed_kernel(DeviceLinear w, const int32_t* tokens, int64_t n_streams, float* out,
                             float* first) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const int64_t h = w.cols;
    const int64_t row = tokens[t];
    if (row_fits_slice(h)) {
        float v[kRowSlice];
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) {
            const int64_t d = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
            v[j] = d < h ? embedding_value(w, row, d) : 0.0F;
        }
#pragma unroll
        for (int j = 0; j < kRowSlice; ++j) {
            const int64_t d = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
            if (d >= h) break;
            store_embedding(v[j], t, d, h, n_streams, out, first);
        }
        return;
    }
    for (int64_t d = threadIdx.x; d < h; d += blockDim.x) {
        store_embedding(embedding_value(w, row, d), t, d, h, n_streams, out, first);
    }
}

// x[t, s·H + d] += f[t, d]
__global__ void add_per_stream_kernel(float* x, const float* f, int64_t n_rows, int64_t n_streams,
                                      int64_t hidden) {
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t total = n_rows * n_streams * hidden;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t d = i % hidden;
        const int64_t t = i / (n_streams * hidden);
        x[i] += f[t * hidden + d];
    }
}

// ---- per-sequence device caches ----

struct LayerPlan {
    int64_t gdn_conv = 0, gdn_recurrent = 0, ple_conv = 0;  // floats
    int64_t kv_width = 0, index_width = 0, n_block_rows = 0;
    bool attention = false;
};

// The device half of a SequenceState: one allocation for every layer's caches (trunk and MTP)
// and one for verification snapshots (grown on demand).
class DeviceSequence final : public BackendState {
public:
    DeviceSequence(const q4::Config& c, const std::vector<LayerPlan>& trunk,
                   const std::vector<LayerPlan>& mtp, int64_t capacity)
        : config_(&c), trunk_plan_(trunk), mtp_plan_(mtp), capacity_(capacity) {
        uint64_t total = 0;
        for (const auto* plans : {&trunk_plan_, &mtp_plan_})
            for (const LayerPlan& p : *plans) total += layer_floats(p);
        caches_ = DeviceBuffer(std::max<uint64_t>(total, 1) * sizeof(float));
        CHERENKOV_CUDA_CHECK(cudaMemset(caches_.data(), 0, caches_.size()));
        float* at = caches_.as<float>();
        layers = carve(trunk_plan_, at);
        mtp_layers = carve(mtp_plan_, at);
    }

    std::unique_ptr<BackendState> clone() const override {
        CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        auto copy = std::make_unique<DeviceSequence>(*config_, trunk_plan_, mtp_plan_, capacity_);
        CHERENKOV_CUDA_CHECK(cudaMemcpy(copy->caches_.data(), caches_.data(), caches_.size(),
                                        cudaMemcpyDeviceToDevice));
        for (size_t i = 0; i < layers.size(); ++i) {
            copy->layers[i].attention.length = layers[i].attention.length;
            copy->layers[i].attention.n_block_keys = layers[i].attention.n_block_keys;
        }
        for (size_t i = 0; i < mtp_layers.size(); ++i) {
            copy->mtp_layers[i].attention.length = mtp_layers[i].attention.length;
            copy->mtp_layers[i].attention.n_block_keys = mtp_layers[i].attention.n_block_keys;
        }
        if (snapshot_rows_ > 0) {
            copy->reserve_snapshots(snapshot_rows_);
            CHERENKOV_CUDA_CHECK(cudaMemcpy(copy->snapshots_.data(), snapshots_.data(),
                                            snapshots_.size(), cudaMemcpyDeviceToDevice));
        }
        if (has_chain_residual_) {
            copy->keep_chain_residual(chain_residual(), nullptr);
            CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        }
        if (residual_rows_ > 0) {
            copy->reserve_residuals(residual_rows_);
            copy->residual_rows_ = residual_rows_;
            CHERENKOV_CUDA_CHECK(cudaMemcpy(copy->residuals_.data(), residuals_.data(),
                                            residual_bytes(residual_rows_),
                                            cudaMemcpyDeviceToDevice));
        }
        return copy;
    }

    uint64_t bytes() const override {
        return caches_.size() + snapshots_.size() + residuals_.size() + chain_residual_.size();
    }
    int64_t capacity() const { return capacity_; }

    // Saved form: a header (capacity, layer counts, each layer's attention length and block-key
    // count), then per layer its recurrent and convolution states and the valid rows of its
    // attention caches, in carve() order, then the pending MTP residuals (count, rows). Copies are
    // synchronous: parking happens between steps.
    void save(std::vector<std::byte>& out) const override {
        CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        out.clear();
        const auto put = [&](const void* src, size_t n, cudaMemcpyKind kind) {
            const size_t at = out.size();
            out.resize(at + n);
            if (n > 0) CHERENKOV_CUDA_CHECK(cudaMemcpy(out.data() + at, src, n, kind));
        };
        const auto put_value = [&](int64_t v) { put(&v, sizeof v, cudaMemcpyHostToHost); };
        put_value(capacity_);
        put_value(static_cast<int64_t>(layers.size()));
        put_value(static_cast<int64_t>(mtp_layers.size()));
        walk(
            *this,
            [&](const float* device, int64_t floats) {
                put(device, static_cast<size_t>(floats) * sizeof(float), cudaMemcpyDeviceToHost);
            },
            [&](const DeviceAttentionCache& a) {
                put_value(a.length);
                put_value(a.n_block_keys);
            });
        put_value(residual_rows_);
        put(residuals_.data(), residual_bytes(residual_rows_), cudaMemcpyDeviceToHost);
    }

    void restore(std::span<const std::byte> saved) override {
        size_t at = 0;
        const auto take = [&](void* dst, size_t n, cudaMemcpyKind kind) {
            if (saved.size() - at < n) throw_corrupt("a parked sequence state is truncated");
            if (n > 0) CHERENKOV_CUDA_CHECK(cudaMemcpy(dst, saved.data() + at, n, kind));
            at += n;
        };
        const auto take_value = [&]() {
            int64_t v = 0;
            take(&v, sizeof v, cudaMemcpyHostToHost);
            return v;
        };
        if (take_value() != capacity_ || take_value() != static_cast<int64_t>(layers.size()) ||
            take_value() != static_cast<int64_t>(mtp_layers.size())) {
            throw_corrupt("a parked sequence state was made for another model or capacity");
        }
        CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        // Lengths come first in the saved form of a layer, so segments sized by them follow.
        walk(
            *this,
            [&](float* device, int64_t floats) {
                take(device, static_cast<size_t>(floats) * sizeof(float), cudaMemcpyHostToDevice);
            },
            [&](DeviceAttentionCache& a) {
                const int64_t length = take_value();
                const int64_t blocks = take_value();
                if (length < 0 || length > a.capacity || blocks < 0 || blocks > length) {
                    throw_corrupt("a parked sequence state has attention lengths out of range");
                }
                a.length = length;
                a.n_block_keys = blocks;
            });
        const int64_t residual_rows = take_value();
        if (residual_rows < 0 || residual_rows > capacity_) {
            throw_corrupt("a parked sequence state has a pending residual count out of range");
        }
        reserve_residuals(residual_rows);
        residual_rows_ = residual_rows;
        has_chain_residual_ = false;  // a chain lives within one step; parking is between steps
        take(residuals_.data(), residual_bytes(residual_rows), cudaMemcpyHostToDevice);
        if (at != saved.size()) throw_corrupt("a parked sequence state has trailing bytes");
    }

    void reset() override {
        CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        CHERENKOV_CUDA_CHECK(cudaMemset(caches_.data(), 0, caches_.size()));
        for (auto* states : {&layers, &mtp_layers}) {
            for (DeviceLayerState& l : *states) {
                l.attention.length = 0;
                l.attention.n_block_keys = 0;
            }
        }
        residual_rows_ = 0;
        has_chain_residual_ = false;
    }

    // The pending MTP residuals (SequenceState::n_pending_residual_rows of them), kept on the
    // device so that neither the forward call that makes them nor the catch-up that reads them
    // crosses PCIe. Grown on demand: a decode step's rows, or a prefill chunk's.
    void append_residuals(const float* x, int64_t n_rows, cudaStream_t stream) {
        if (residual_rows_ + n_rows > residual_capacity_) {
            // Queued copies into the old buffer finish before its rows move and it is freed.
            CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream));
            const int64_t rows = std::max(residual_rows_ + n_rows, 2 * residual_capacity_);
            DeviceBuffer grown(residual_bytes(rows));
            if (residual_rows_ > 0) {
                CHERENKOV_CUDA_CHECK(cudaMemcpy(grown.data(), residuals_.data(),
                                                residual_bytes(residual_rows_),
                                                cudaMemcpyDeviceToDevice));
            }
            residuals_ = std::move(grown);
            residual_capacity_ = rows;
        }
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(residuals_.as<float>() + residual_rows_ * width(), x,
                                             residual_bytes(n_rows), cudaMemcpyDeviceToDevice,
                                             stream));
        residual_rows_ += n_rows;
    }
    const float* residuals() const { return residuals_.as<float>(); }

    // R' of the last MTP call's last row: a chained draft's h, kept where it was made.
    void keep_chain_residual(const float* row, cudaStream_t stream) {
        if (chain_residual_.size() == 0) chain_residual_ = DeviceBuffer(residual_bytes(1));
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(chain_residual_.data(), row, residual_bytes(1),
                                             cudaMemcpyDeviceToDevice, stream));
        has_chain_residual_ = true;
    }
    bool has_chain_residual() const { return has_chain_residual_; }
    const float* chain_residual() const { return chain_residual_.as<float>(); }
    int64_t residual_rows() const { return residual_rows_; }
    void truncate_residuals(int64_t rows) { residual_rows_ = std::min(residual_rows_, rows); }

    // Room for per-row snapshots of `rows` rows: per trunk layer [rows, recurrent], [rows, conv]
    // (GDN) and [rows, ple conv] (PLE layers).
    void reserve_snapshots(int64_t rows) {
        if (rows <= snapshot_rows_) return;
        uint64_t per_row = 0;
        for (const LayerPlan& p : trunk_plan_) per_row += p.gdn_recurrent + p.gdn_conv + p.ple_conv;
        snapshots_ = DeviceBuffer(std::max<uint64_t>(per_row * rows, 1) * sizeof(float));
        snapshot_rows_ = rows;
    }
    struct LayerSnapshots {
        float* recurrent = nullptr;
        float* conv = nullptr;
        float* ple = nullptr;
    };
    LayerSnapshots snapshots_of(size_t layer) const {
        float* at = snapshots_.as<float>();
        for (size_t l = 0; l < layer; ++l) {
            const LayerPlan& p = trunk_plan_[l];
            at += (p.gdn_recurrent + p.gdn_conv + p.ple_conv) * snapshot_rows_;
        }
        const LayerPlan& p = trunk_plan_[layer];
        LayerSnapshots s;
        if (p.gdn_recurrent > 0) s.recurrent = at;
        at += p.gdn_recurrent * snapshot_rows_;
        if (p.gdn_conv > 0) s.conv = at;
        at += p.gdn_conv * snapshot_rows_;
        if (p.ple_conv > 0) s.ple = at;
        return s;
    }
    const LayerPlan& plan(size_t layer) const { return trunk_plan_[layer]; }
    // What a captured step bakes in of this sequence.
    const void* caches() const { return caches_.data(); }
    const void* snapshots() const { return snapshots_.data(); }
    int64_t snapshot_rows() const { return snapshot_rows_; }

    std::vector<DeviceLayerState> layers;
    std::vector<DeviceLayerState> mtp_layers;

private:
    // Visits every layer of `self` (trunk, then MTP) in carve() order: `lengths` with its
    // attention cache, then `segment` with each stretch of valid floats. Lengths come before the
    // segments they size, so restore() can set them in `lengths` (Self non-const) and save()
    // only reads them (Self const).
    template <typename Self, typename Segment, typename Lengths>
    static void walk(Self& self, Segment&& segment, Lengths&& lengths) {
        const auto visit = [&](const std::vector<LayerPlan>& plans, auto& states) {
            for (size_t i = 0; i < plans.size(); ++i) {
                const LayerPlan& p = plans[i];
                auto& s = states[i];
                segment(s.gdn.conv, p.gdn_conv);
                segment(s.gdn.recurrent, p.gdn_recurrent);
                segment(s.ple.conv, p.ple_conv);
                if (!p.attention) continue;
                lengths(s.attention);
                segment(s.attention.keys, s.attention.length * p.kv_width);
                segment(s.attention.values, s.attention.length * p.kv_width);
                segment(s.attention.index_keys, s.attention.length * p.index_width);
                segment(s.attention.block_keys, s.attention.n_block_keys * p.index_width);
            }
        };
        visit(self.trunk_plan_, self.layers);
        visit(self.mtp_plan_, self.mtp_layers);
    }

    uint64_t layer_floats(const LayerPlan& p) const {
        uint64_t n = p.gdn_conv + p.gdn_recurrent + p.ple_conv;
        if (p.attention) {
            n += 2 * capacity_ * p.kv_width + capacity_ * p.index_width +
                 p.n_block_rows * p.index_width;
        }
        return n;
    }
    std::vector<DeviceLayerState> carve(const std::vector<LayerPlan>& plans, float*& at) const {
        std::vector<DeviceLayerState> out(plans.size());
        for (size_t i = 0; i < plans.size(); ++i) {
            const LayerPlan& p = plans[i];
            DeviceLayerState& s = out[i];
            const auto take = [&](int64_t n) {
                float* ptr = n > 0 ? at : nullptr;
                at += n;
                return ptr;
            };
            s.gdn.conv = take(p.gdn_conv);
            s.gdn.recurrent = take(p.gdn_recurrent);
            s.ple.conv = take(p.ple_conv);
            if (p.attention) {
                s.attention.capacity = capacity_;
                s.attention.keys = take(capacity_ * p.kv_width);
                s.attention.values = take(capacity_ * p.kv_width);
                s.attention.index_keys = take(capacity_ * p.index_width);
                s.attention.block_keys = take(p.n_block_rows * p.index_width);
            }
        }
        return out;
    }

    int64_t width() const { return config_->hc_width(); }
    size_t residual_bytes(int64_t rows) const {
        return static_cast<size_t>(rows * width()) * sizeof(float);
    }
    void reserve_residuals(int64_t rows) {
        if (rows <= residual_capacity_) return;
        residuals_ = DeviceBuffer(residual_bytes(std::max<int64_t>(rows, 1)));
        residual_capacity_ = std::max<int64_t>(rows, 1);
    }

    const q4::Config* config_;
    std::vector<LayerPlan> trunk_plan_, mtp_plan_;
    int64_t capacity_;
    DeviceBuffer caches_;
    DeviceBuffer snapshots_;
    int64_t snapshot_rows_ = 0;
    DeviceBuffer residuals_;       // [residual_capacity_, C·H]
    DeviceBuffer chain_residual_;  // [C·H]
    bool has_chain_residual_ = false;
    int64_t residual_capacity_ = 0;
    int64_t residual_rows_ = 0;
};

LayerPlan plan_layer(const q4::Config& c, const LayerWeights& w, int64_t capacity) {
    LayerPlan p;
    if (w.gdn) {
        p.gdn_conv = (c.linear_conv_kernel_dim - 1) * c.conv_dim;
        p.gdn_recurrent =
            c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
    } else {
        p.attention = true;
        p.kv_width = c.num_key_value_heads * c.head_dim;
        p.index_width = c.indexer ? c.indexer->head_dim : 0;
        p.n_block_rows = c.indexer ? capacity / c.indexer->compress_ratio + 1 : 0;
    }
    if (w.ple) p.ple_conv = c.ple_conv_state_len * c.hc_width();
    return p;
}

// A call's position and token ids, uploaded together as [position][tokens as int32 ...]: the
// position for the QSA kernels (DeviceContext::position), the ids for the embedding.
class StepInputs {
public:
    StepInputs(int64_t position, std::span<const int32_t> tokens, cudaStream_t stream)
        : words_(1 + (tokens.size() + 1) / 2, stream) {
        std::vector<int64_t> host(words_.size(), 0);
        host[0] = position;
        std::memcpy(host.data() + 1, tokens.data(), tokens.size_bytes());
        // From pageable memory: the call returns once `host` has been staged.
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(words_.data(), host.data(),
                                             host.size() * sizeof(int64_t), cudaMemcpyHostToDevice,
                                             stream));
    }
    const int64_t* position() const { return words_.data(); }
    const int32_t* tokens() const { return reinterpret_cast<const int32_t*>(words_.data() + 1); }

private:
    DeviceScratch<int64_t> words_;
};

const DeviceSequence& device_state(const SequenceState& state) {
    const auto* d = dynamic_cast<const DeviceSequence*>(state.backend.get());
    if (d == nullptr) throw_internal("a sequence state made by another backend was given to cuda");
    return *d;
}

DeviceSequence& device_state(SequenceState& state) {
    return const_cast<DeviceSequence&>(device_state(std::as_const(state)));
}

int64_t compress_ratio(const q4::Config& c) {
    return c.indexer ? c.indexer->compress_ratio : 0;
}

// The CUDA backend's ops (engine/model/backend_ops.h): device weights, the device expert pool, the
// call and layer arenas, and the CUDA graphs its capture regions become.
class CudaBackendOps final : public BackendOps {
public:
    CudaBackendOps(const ModelWeights& weights, ExpertSource& experts,
                   const CudaModelOptions& options);
    ~CudaBackendOps() override {
        clear_graphs();
        side_.reset();
        if (registered_ != nullptr) {
            cudaDeviceSynchronize();
            cudaHostUnregister(registered_);
        }
        pool_.reset();
        device_.reset();
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }

    const char* name() const override { return "cuda"; }
    SequenceState new_sequence(int64_t max_ctx) const override;
    void check_room(const SequenceState& state, int64_t n_rows) const override;
    std::unique_ptr<ForwardPass> begin_pass(SequenceState& state, const PassSpec& spec) override;
    void after_pass() override { grow_arenas(); }
    void rollback_layer(SequenceState& state, size_t layer, int64_t row, int64_t keep) override;
    void truncate_mtp_attention(SequenceState& state, size_t layer, int64_t n) override {
        device_state(state).mtp_layers[layer].attention.truncate(n,
                                                                 compress_ratio(weights_.config));
    }
    void truncate_residuals(SequenceState& state, int64_t rows) override {
        device_state(state).truncate_residuals(rows);
    }
    void clear_residuals(SequenceState& state) override {
        device_state(state).truncate_residuals(0);
    }
    int64_t max_rows_per_call() const override { return prefill_rows_; }
    BackendStats backend_stats() const override;
    GpuStageTotals gpu_stage_totals() const override;
    GpuStageTotals prefill_gpu_stage_totals() const override;

private:
    friend class CudaPass;

    DeviceContext context(ForwardTrace* trace) const;

    // Logits of a call's logit rows, and with a selection the choices (uploaded) and the ids.
    struct HeadBuffers {
        HeadBuffers(int64_t n_rows, int64_t vocab, const TokenSelection* select,
                    cudaStream_t stream);
        DeviceScratch<float> logits;
        DeviceScratch<TokenChoice> choices;  // empty without a selection
        DeviceScratch<int32_t> tokens;
        int64_t n_rows;
        int64_t vocab;
    };
    void download(float* host, const float* device, int64_t n) const;

    // The arguments a captured layer region baked in: equal keys replay the same graph.
    struct SegmentKey {
        const void* layer;
        int64_t n_rows;
        const void* x;
        const void* position;
        const void* recurrent;
        const void* conv;
        const void* recurrent_snapshots;
        const void* conv_snapshots;
        const void* ple_rows;
        const void* ple_conv;
        const void* ple_snapshots;
        const void* attention;  // the QSA cache (its keys)
        QsaLaunchShape qsa;
        const void* staging;
        const void* arena;
        uint64_t arena_generation;
        const void* moe_addresses;  // the layer's addresses when routed on the device, else null
        auto operator<=>(const SegmentKey&) const = default;
    };
    static constexpr size_t kMaxGraphs = 4096;
    // Replays the graph captured for `key`, or runs `body` (the first time a key is seen) or
    // captures it (the second time) and launches that. Returns whether `body` ran.
    template <typename Key, typename Body>
    bool run_graph(std::map<Key, cudaGraphExec_t>& graphs, std::map<Key, int>& seen,
                   size_t max_graphs, const Key& key, Body&& body, uint64_t& captures,
                   uint64_t& launches);

    // A whole call as one graph, when every layer is routed on the device: from the embedding to
    // the token selection. What varies from step to step is device data (the position, the
    // tokens, the n-gram rows, the choices, uploaded before the launch); the key holds what the
    // launches bake in.
    struct StepKey {
        int64_t mtp_layer;  // -1: the trunk's layers; else the MTP layer of the call
        int64_t n_rows;
        int64_t logit_rows;
        bool select;
        bool snapshot_rows;
        const void* caches;     // the sequence's layer caches
        const void* snapshots;  // and its verification snapshots
        int64_t snapshot_capacity;
        const void* call_arena;
        uint64_t call_generation;
        const void* layer_arena;
        uint64_t layer_generation;
        QsaLaunchShape qsa;
        auto operator<=>(const StepKey&) const = default;
    };
    static constexpr size_t kMaxStepGraphs = 64;
    // Whether a call of n_rows through `layers` can be one graph: graphs on, no trace or routing
    // trace, every layer routed on the device.
    bool step_graph_possible(const ForwardTrace* trace, bool routing_traced, int64_t n_rows,
                             std::span<const DeviceLayerWeights> layers);
    // Runs, captures or replays `step` (the whole call) under `key` (its arenas and QSA shape
    // filled in here), then does the host side of a replay and releases the layers' slots.
    template <typename Step>
    void run_step_graph(StepKey key, std::span<const DeviceLayerWeights> layers,
                        std::span<DeviceLayerState> states, int64_t position, Step&& step);
    void clear_graphs();
    // Grows an arena a call overflowed (between calls: nothing of it is alive then).
    void grow_arenas();
    // Page-locks the source's record region, if it has one.
    void register_records(const RecordMemory& records);

    const ModelWeights& weights_;
    ExpertSource& experts_;
    CudaModelOptions options_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<DeviceModelWeights> device_;
    DeviceBuffer rope_inv_freq_;
    std::unique_ptr<DeviceExpertPool> pool_;
    std::unique_ptr<CpuExperts> cpu_experts_;  // decode misses computed on the CPU (--cpu-experts)
    int64_t next_layer_copies_ = 0;            // --tuning next_layer_copies
    std::string pool_description_;
    int64_t prefill_rows_ = 1;             // rows per prefill call the scratch reservation covers
    uint64_t scratch_reserved_bytes_ = 0;  // kept outside the pool for those rows
    std::vector<LayerPlan> trunk_plan_, mtp_plan_;
    std::string device_name_;
    uint64_t device_total_bytes_ = 0;
    void* registered_ = nullptr;  // the host records' page-locked region, if any
    uint64_t registered_bytes_ = 0;
    DeviceArena call_arena_;   // a call's temporaries outside the layers
    DeviceArena layer_arena_;  // one layer's temporaries, reset per layer
    bool graphs_enabled_ = true;
    bool step_graphs_enabled_ = true;
    bool device_routing_ = true;         // device_routing=off: every layer routed by the host
    std::unique_ptr<SideStreams> side_;  // null with side_streams=off
    // The device's facts and the kernel switches, installed around every call (KernelScope).
    KernelPolicy kernels_;
    std::map<SegmentKey, cudaGraphExec_t> graphs_;
    std::map<SegmentKey, int> seen_;
    uint64_t graph_captures_ = 0;
    uint64_t graph_launches_ = 0;
    std::map<StepKey, cudaGraphExec_t> step_graphs_;
    std::map<StepKey, int> step_seen_;
    uint64_t step_graph_captures_ = 0;
    uint64_t step_graph_launches_ = 0;
    bool in_step_graph_ = false;  // inside a whole-step body: layers queue kernels only
    DecodePhases decode_phases_;
    // GPU stage coverage of decode and MTP calls; mutable: reading it folds in finished windows.
    mutable std::unique_ptr<GpuStageTimer> stage_timer_;          // made once stream_ exists
    mutable std::unique_ptr<GpuStageTimer> prefill_stage_timer_;  // prefill calls' windows
    HostStaging ple_staging_;  // a call's n-gram rows on their way to the device
    // Page-locked room for the selected tokens' read-back (only take() is used): a copy to
    // pageable memory waits for the stream inside the driver and returns ~13 µs after the copy
    // (CUPTI trace of a decode step), where this one is queued and the stream sync returns at once.
    HostStaging token_readback_;
    uint64_t device_routed_calls_ = 0;  // MoE layer calls routed on the device
};

// One forward or MTP call on the device: every op is queued on the engine stream. The call's
// temporaries come from the call arena, a layer's from the layer arena (reset per layer), so
// their addresses repeat from step to step and the capture regions replay as graphs.
class CudaPass final : public ForwardPass {
public:
    CudaPass(CudaBackendOps& ops, SequenceState& state, const PassSpec& spec);

    float* call_array(int64_t n) override {
        return call_arrays_.emplace_back(std::make_unique<DeviceScratch<float>>(n, stream_))
            ->data();
    }
    float* layer_array(int64_t n) override {
        return layer_arrays_.emplace_back(std::make_unique<DeviceScratch<float>>(n, stream_))
            ->data();
    }
    void set_trace_prefix(std::string prefix) override { ctx_.trace_prefix = std::move(prefix); }
    void record(const char* name, const float* data, int64_t n) override {
        ctx_.record(name, data, n);
    }

    void embed(float* x, float* first) override {
        launch_dependent(embed_kernel, dim3(static_cast<unsigned>(rows())), dim3(256), 0, stream_,
                         ops_.device_->embed, inputs_->tokens(), c_.hc_count, x, first);
    }
    void mtp_embed(float* e) override {
        float* replicated = call_array(rows() * c_.hidden_size);
        launch_dependent(embed_kernel, dim3(static_cast<unsigned>(rows())), dim3(256), 0, stream_,
                         ops_.device_->mtp->embed, inputs_->tokens(), int64_t{1}, replicated, e);
    }
    void residual_input(float* h) override;
    void mtp_norm(MtpNorm which, float* x, int64_t n_rows, int64_t width) override {
        const DeviceMtpWeights& mtp = *ops_.device_->mtp;
        rms_norm_rows(
            x, which == MtpNorm::Embedding ? mtp.pre_fc_norm_embedding : mtp.pre_fc_norm_hidden,
            n_rows, width, width, ctx_.eps(), x, stream_);
    }
    void mtp_linear(MtpLinear which, const float* x, int64_t n_rows, float* y) override {
        const DeviceMtpWeights& mtp = *ops_.device_->mtp;
        linear_apply(which == MtpLinear::FcEmbedding ? mtp.fc_embedding : mtp.fc_hidden, x, n_rows,
                     y, stream_);
    }
    void add_per_stream(float* x, const float* f) override {
        launch_dependent(add_per_stream_kernel, dim3(elementwise_blocks(rows() * c_.hc_width())),
                         dim3(256), 0, stream_, x, f, rows(), c_.hc_count, c_.hidden_size);
    }

    void begin_layer(LayerRef layer, std::string trace_prefix) override;
    void end_layer() override;
    void ple(float* x) override;
    void mix(Mixer which, const float* x, int64_t n_rows, float* mix, float* inject) override {
        hyper_connection_mix(mixer(which), x, n_rows, ctx_, mix, inject);
    }
    void token_mixer(const float* mix, float* y) override {
        if (w_->gdn) {
            gated_deltanet_forward(*w_->gdn, s_->gdn, mix, rows(), y, ctx_);
        } else {
            sparse_attention_forward(*w_->qsa, s_->attention, mix, rows(), spec_.first_position, y,
                                     ctx_);
        }
    }
    void combine(float* x, const float* inject, const float* y) override {
        hyper_connection_combine(x, inject, y, rows(), c_.hc_count, c_.hidden_size, stream_);
    }
    // A layer the device pool holds whole is routed on the device: nothing in it waits for the
    // host, and a decode step of it is then one graph.
    MoePath moe_path() override {
        on_device_ = ops_.device_routing_ ? cuda::moe_on_device(w_->moe, rows(), ctx_) : nullptr;
        return on_device_ != nullptr ? MoePath::Device : MoePath::Host;
    }
    void moe_on_device(const float* mix, float* y, float* x, const float* inject) override {
        moe_forward_on_device(w_->moe, on_device_, mix, rows(), y, ctx_,
                              ResidualUpdate{x, inject, c_.hc_count});
    }
    void moe_route(const float* mix, const LayerRef* next) override {
        cuda::moe_route(w_->moe, next_moe(next), mix, rows(), ctx_);
    }
    void moe_finish(const float* mix, const LayerRef* next, float* y, float* x,
                    const float* inject) override {
        CHERENKOV_ASSERT(!ops_.in_step_graph_,
                         "a whole-step graph has every layer routed on the device");
        cuda::moe_finish(w_->moe, next_moe(next), mix, rows(), y, ctx_,
                         ResidualUpdate{x, inject, c_.hc_count});
    }
    void layer_region(const float* x, const std::function<void()>& body) override;

    void step(const std::function<void()>& body) override;
    void head(Head which, const float* mix, int64_t n_rows) override;
    void collect(std::vector<float>& logits, std::vector<int32_t>& tokens) override;
    void keep_residuals(const float* x) override {
        end_window();
        dev_.append_residuals(x, rows(), stream_);
    }
    void keep_chain_residual(const float* x) override {
        dev_.keep_chain_residual(x + (rows() - 1) * c_.hc_width(), stream_);
    }

private:
    int64_t rows() const { return spec_.n_rows(); }
    bool trunk() const { return spec_.mtp_layer < 0; }
    const float* ple_rows() const { return layer_.mtp ? nullptr : ple_rows_[layer_.index]->data(); }
    // Gathers trunk layer `layer`'s n-gram rows into the staging and queues their copy.
    void upload_ple_rows(size_t layer);
    const DeviceMoeWeights* next_moe(const LayerRef* next) const {
        return next != nullptr ? &ops_.device_->layers[next->index].moe : nullptr;
    }
    const DeviceHyperConnectionWeights& mixer(Mixer which) const {
        switch (which) {
            case Mixer::Attention: return w_->attn_hc;
            case Mixer::Mlp: return w_->mlp_hc;
            case Mixer::Final: return ops_.device_->final_mixer;
            case Mixer::MtpHead: return ops_.device_->mtp->mixer;
        }
        throw_internal("unknown mixer");
    }
    // A call (no trace) is one GPU timing window of its kind's timer, from its inputs' upload to
    // its head; a prefill call's gathering of n-gram rows is a pause in it (a handoff gap where
    // the device runs out of queued work meanwhile).
    void end_window() {
        if (window_ == nullptr) return;
        window_->end_window();
        window_ = nullptr;
    }

    CudaBackendOps& ops_;
    const q4::Config& c_;
    cudaStream_t stream_;
    // Installed for the whole call; destroyed after every temporary below.
    ArenaScope call_scope_;
    KernelScope kernel_scope_;
    LaunchOverlapScope overlap_scope_;
    SequenceState& state_;
    DeviceSequence& dev_;
    const PassSpec& spec_;
    std::vector<std::unique_ptr<DeviceScratch<float>>> ple_rows_;  // per trunk layer
    // A PLE layer's rows in the ops' page-locked staging (float offsets), and whether they are
    // still to be gathered and copied (a prefill call's, until the layer's ple()).
    float* ple_host_ = nullptr;
    std::vector<size_t> ple_offset_;
    std::vector<bool> ple_pending_;
    GpuStageTimer* window_ = nullptr;  // the open window's timer
    std::optional<StepInputs> inputs_;
    std::optional<CudaBackendOps::HeadBuffers> head_out_;
    DeviceContext ctx_;
    std::vector<std::unique_ptr<DeviceScratch<float>>> call_arrays_;
    // The current layer.
    LayerRef layer_;
    const DeviceLayerWeights* w_ = nullptr;
    DeviceLayerState* s_ = nullptr;
    const ExpertAddress* on_device_ = nullptr;
    std::optional<ArenaScope> layer_scope_;
    std::vector<std::unique_ptr<DeviceScratch<float>>> layer_arrays_;
};

CudaPass::CudaPass(CudaBackendOps& ops, SequenceState& state, const PassSpec& spec)
    : ops_(ops),
      c_(ops.weights_.config),
      stream_(ops.stream_),
      call_scope_(&ops.call_arena_),
      kernel_scope_(ops.kernels_),
      overlap_scope_(spec.n_rows() <= kMaxGemvRows),
      state_(state),
      dev_(device_state(state)),
      spec_(spec) {
    const int64_t n_rows = rows();
    const bool prefill_window = n_rows > kMaxGemvRows && spec.trace == nullptr;
    if (trunk()) {
        // Every PLE layer's n-gram rows: gathered on the host, dequantized and copied to the
        // device. A decode call does it now, before its graphs; a prefill call when it reaches
        // the layer (ple()), so the gather overlaps the kernels of the layers before it.
        const size_t n_layers = ops.weights_.layers.size();
        size_t n_ple = 0;
        for (size_t l = 0; l < n_layers; ++l) {
            const bool has = ops.weights_.layers[l].ple.has_value();
            ple_rows_.push_back(std::make_unique<DeviceScratch<float>>(
                has ? static_cast<size_t>(n_rows * c_.ple_embed_dim) : 0, stream_));
            ple_offset_.push_back(has ? n_ple++ * static_cast<size_t>(n_rows * c_.ple_embed_dim)
                                      : 0);
        }
        ple_pending_.assign(n_layers, false);
        if (n_ple > 0) {
            ple_host_ = static_cast<float*>(ops.ple_staging_.take(
                n_ple * static_cast<size_t>(n_rows * c_.ple_embed_dim) * sizeof(float)));
        }
        for (size_t l = 0; l < n_layers; ++l) {
            if (!ops.weights_.layers[l].ple) continue;
            if (prefill_window) {
                ple_pending_[l] = true;
            } else {
                upload_ple_rows(l);
            }
        }
    }
    if (spec.trace == nullptr) {
        window_ = prefill_window ? ops.prefill_stage_timer_.get() : ops.stage_timer_.get();
        window_->begin_window();
    }
    // The call's variable inputs in one upload: the position (QSA kernels read it on the device)
    // and the token ids.
    inputs_.emplace(spec.first_position, spec.tokens, stream_);
    if (trunk() && spec.snapshot_rows) dev_.reserve_snapshots(n_rows);
    head_out_.emplace(spec.logit_rows, c_.vocab_size, spec.select, stream_);
    ctx_ = ops.context(spec.trace);
    ctx_.position = inputs_->position();
    ctx_.routing_trace = spec.routing_trace;
    ctx_.trace_step = spec.trace_step;
    ctx_.stages = window_;
}

void CudaPass::residual_input(float* h) {
    const auto bytes = static_cast<size_t>(rows() * c_.hc_width()) * sizeof(float);
    if (spec_.chain) {
        if (!dev_.has_chain_residual())
            throw_internal("a chained draft without a previous MTP call");
        CHERENKOV_CUDA_CHECK(
            cudaMemcpyAsync(h, dev_.chain_residual(), bytes, cudaMemcpyDeviceToDevice, stream_));
        return;
    }
    if (dev_.residual_rows() != rows()) {
        throw_internal("the device holds " + std::to_string(dev_.residual_rows()) +
                       " pending residual rows; the catch-up needs " + std::to_string(rows()));
    }
    CHERENKOV_CUDA_CHECK(
        cudaMemcpyAsync(h, dev_.residuals(), bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaPass::upload_ple_rows(size_t layer) {
    const PleWeights& ple = *ops_.weights_.layers[layer].ple;
    const int64_t n_rows = rows();
    const int64_t p_dim = c_.ple_embed_dim;
    const int64_t n_heads = c_.n_ngram_heads;
    const std::vector<int64_t>& ids = (*spec_.ngram_ids)[layer];
    float* host = ple_host_ + ple_offset_[layer];
    const auto gather = [&](size_t begin, size_t end) {
        for (auto t = static_cast<int64_t>(begin); t < static_cast<int64_t>(end); ++t) {
            for (int64_t j = 0; j < n_heads; ++j) {
                ple.gather_row(ids[static_cast<size_t>(t * n_heads + j)],
                               host + t * p_dim + j * ple.width);
            }
        }
    };
    // A prefill chunk's thousands of random rows of the mapped table took 4.5 ms on one thread
    // while the device sat idle (CUPTI trace, 512 rows); the CPU pool, which only decode calls
    // use for experts, splits them. A decode call's few rows stay on the caller.
    ThreadPool* pool = ops_.options_.cpu_pool;
    if (pool != nullptr && n_rows > kMaxGemvRows) {
        pool->parallel_for(static_cast<size_t>(n_rows), 16, gather);
    } else {
        gather(0, static_cast<size_t>(n_rows));
    }
    ops_.ple_staging_.copy_to_device(ple_rows_[layer]->data(), ple_offset_[layer] * sizeof(float),
                                     static_cast<size_t>(n_rows * p_dim) * sizeof(float), stream_);
}

void CudaPass::ple(float* x) {
    if (!layer_.mtp && ple_pending_[layer_.index]) {
        // The host gathers while the device runs what is queued; it waits only if that runs out.
        if (window_ != nullptr) window_->pause();
        upload_ple_rows(layer_.index);
        ple_pending_[layer_.index] = false;
        if (window_ != nullptr) window_->resume();
    }
    ple_forward(*w_->ple, s_->ple, ple_rows(), x, rows(), ctx_);
}

void CudaPass::begin_layer(LayerRef layer, std::string trace_prefix) {
    layer_ = layer;
    const DeviceModelWeights& d = *ops_.device_;
    w_ = layer.mtp ? &d.mtp->layers[layer.index] : &d.layers[layer.index];
    s_ = layer.mtp ? &dev_.mtp_layers[layer.index] : &dev_.layers[layer.index];
    on_device_ = nullptr;
    ctx_.trace_prefix = std::move(trace_prefix);
    // Verification snapshots are of trunk layers only.
    DeviceSequence::LayerSnapshots snaps;
    if (!layer.mtp && spec_.snapshot_rows) snaps = dev_.snapshots_of(layer.index);
    ctx_.gdn_recurrent_snapshots = snaps.recurrent;
    ctx_.gdn_conv_snapshots = snaps.conv;
    ctx_.ple_conv_snapshots = snaps.ple;
    // Every temporary of the layer comes from the layer arena, at the same addresses each step.
    layer_scope_.emplace(&ops_.layer_arena_);
    // A decode call's layer times the host's phases if it is routed on the host (moe_finish).
    ctx_.phases = rows() <= kMaxGemvRows && spec_.trace == nullptr ? &ops_.decode_phases_ : nullptr;
    if (ctx_.phases != nullptr) ops_.decode_phases_.layer_start = DecodePhases::Clock::now();
}

void CudaPass::end_layer() {
    // Inside a whole-step graph the step releases every layer after its launch.
    if (on_device_ != nullptr && !ops_.in_step_graph_) {
        ops_.pool_->release_layer(w_->moe.table_layer);
        ++ops_.device_routed_calls_;
    }
    layer_arrays_.clear();
    layer_scope_.reset();
}

// Decode calls replay a layer region as one CUDA graph: its kernels' arguments are the same every
// step but for what the key holds (a QSA layer's launch shape changes with the position, which
// its kernels read on the device); traces read back. A step routed wholly on the device is one
// graph instead (step()).
void CudaPass::layer_region(const float* x, const std::function<void()>& body) {
    const bool graph = !ops_.in_step_graph_ && ops_.graphs_enabled_ && spec_.trace == nullptr &&
                       rows() <= kMaxGemvRows && !ops_.layer_arena_.overflowed();
    if (!graph) {
        body();
        return;
    }
    const int64_t n_rows = rows();
    const CudaBackendOps::SegmentKey key{
        w_,
        n_rows,
        x,
        ctx_.position,
        s_->gdn.recurrent,
        s_->gdn.conv,
        ctx_.gdn_recurrent_snapshots,
        ctx_.gdn_conv_snapshots,
        w_->ple ? ple_rows() : nullptr,
        s_->ple.conv,
        w_->ple ? ctx_.ple_conv_snapshots : nullptr,
        s_->attention.keys,
        w_->qsa ? qsa_launch_shape(c_, w_->qsa->has_indexer, spec_.first_position, n_rows)
                : QsaLaunchShape{},
        ops_.pool_->host_staging(0),
        ops_.layer_arena_.base(),
        ops_.layer_arena_.generation(),
        on_device_};
    const bool ran = ops_.run_graph(ops_.graphs_, ops_.seen_, CudaBackendOps::kMaxGraphs, key, body,
                                    ops_.graph_captures_, ops_.graph_launches_);
    // A replay: the host side of what the QSA call would have done.
    if (!ran && w_->qsa) sparse_attention_advance(s_->attention, n_rows, compress_ratio(c_));
}

void CudaPass::step(const std::function<void()>& body) {
    const DeviceModelWeights& d = *ops_.device_;
    const std::span<const DeviceLayerWeights> layers =
        trunk() ? std::span<const DeviceLayerWeights>(d.layers)
                : std::span<const DeviceLayerWeights>(&d.mtp->layers[spec_.mtp_layer], 1);
    if (!ops_.step_graph_possible(spec_.trace, spec_.routing_trace != nullptr, rows(), layers)) {
        body();
        return;
    }
    CudaBackendOps::StepKey key{};
    key.mtp_layer = spec_.mtp_layer;
    key.n_rows = rows();
    key.logit_rows = spec_.logit_rows;
    key.select = spec_.select != nullptr;
    key.caches = dev_.caches();
    std::span<DeviceLayerState> states;
    if (trunk()) {
        key.snapshot_rows = spec_.snapshot_rows;
        key.snapshots = dev_.snapshots();
        key.snapshot_capacity = dev_.snapshot_rows();
        states = dev_.layers;
    } else {
        states = std::span<DeviceLayerState>(&dev_.mtp_layers[spec_.mtp_layer], 1);
    }
    ops_.run_step_graph(key, layers, states, spec_.first_position, body);
}

void CudaPass::head(Head which, const float* mix, int64_t n_rows) {
    const DeviceLinear& lm_head =
        which == Head::Trunk ? ops_.device_->lm_head : ops_.device_->mtp->lm_head;
    CudaBackendOps::HeadBuffers& out = *head_out_;
    linear_apply(lm_head, mix, n_rows, out.logits.data(), stream_);
    if (out.tokens.size() == 0) return;
    // With the selection scratch every row's largest key is found over many blocks (greedy rows
    // too: one block per row took ~10 µs at vocab 32768).
    DeviceScratch<uint64_t> scratch(
        static_cast<size_t>(n_rows * token_select_scratch_words(out.vocab)), stream_);
    token_select(out.logits.data(), n_rows, out.vocab, out.choices.data(), scratch.data(),
                 out.tokens.data(), stream_);
}

void CudaPass::collect(std::vector<float>& logits, std::vector<int32_t>& tokens) {
    end_window();
    const CudaBackendOps::HeadBuffers& out = *head_out_;
    const TokenSelection* select = spec_.select;
    const int64_t vocab = out.vocab;
    if (select == nullptr || select->keep_logits) {
        logits.resize(static_cast<size_t>(out.n_rows * vocab));
        ops_.download(logits.data(), out.logits.data(), out.n_rows * vocab);
    }
    if (select == nullptr) return;
    tokens.resize(static_cast<size_t>(out.n_rows));
    const size_t bytes = tokens.size() * sizeof(int32_t);
    auto* landed = static_cast<int32_t*>(ops_.token_readback_.take(bytes));
    CHERENKOV_CUDA_CHECK(
        cudaMemcpyAsync(landed, out.tokens.data(), bytes, cudaMemcpyDeviceToHost, stream_));
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy(landed, landed + tokens.size(), tokens.begin());
    for (const int32_t token : tokens) {
        if (token < 0 || token >= vocab) {
            throw_internal("token_select returned token " + std::to_string(token));
        }
    }
}

std::unique_ptr<ForwardPass> CudaBackendOps::begin_pass(SequenceState& state,
                                                        const PassSpec& spec) {
    return std::make_unique<CudaPass>(*this, state, spec);
}

void CudaBackendOps::check_room(const SequenceState& state, int64_t n_rows) const {
    const DeviceSequence& dev = device_state(state);
    if (state.position + n_rows > dev.capacity()) {
        throw_invalid("the context holds " + std::to_string(dev.capacity()) +
                      " tokens on the device; this call would reach " +
                      std::to_string(state.position + n_rows));
    }
}

void CudaBackendOps::rollback_layer(SequenceState& state, size_t layer, int64_t row, int64_t keep) {
    DeviceSequence& dev = device_state(state);
    DeviceLayerState& s = dev.layers[layer];
    const LayerPlan& p = dev.plan(layer);
    const auto snaps = dev.snapshots_of(layer);
    const auto restore = [&](float* to, const float* from, int64_t n) {
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(to, from + row * n, n * sizeof(float),
                                             cudaMemcpyDeviceToDevice, stream_));
    };
    const LayerWeights& w = weights_.layers[layer];
    if (w.gdn) {
        restore(s.gdn.recurrent, snaps.recurrent, p.gdn_recurrent);
        restore(s.gdn.conv, snaps.conv, p.gdn_conv);
    }
    if (w.ple) restore(s.ple.conv, snaps.ple, p.ple_conv);
    if (w.qsa) s.attention.truncate(keep, compress_ratio(weights_.config));
}

DeviceContext CudaBackendOps::context(ForwardTrace* trace) const {
    DeviceContext ctx;
    ctx.config = &weights_.config;
    ctx.stream = stream_;
    ctx.rope_inv_freq = rope_inv_freq_.as<float>();
    ctx.experts = &experts_;
    ctx.expert_pool = pool_.get();
    ctx.cpu_experts = cpu_experts_.get();
    ctx.next_layer_copies = next_layer_copies_;
    ctx.side = side_.get();
    ctx.trace = trace;
    return ctx;
}

void CudaBackendOps::download(float* host, const float* device, int64_t n) const {
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<size_t>(n) * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

CudaBackendOps::CudaBackendOps(const ModelWeights& weights, ExpertSource& experts,
                               const CudaModelOptions& options)
    : weights_(weights), experts_(experts), options_(options) {
    const q4::Config& c = weights.config;
    int n_devices = 0;
    if (cudaGetDeviceCount(&n_devices) != cudaSuccess || n_devices == 0) {
        cudaGetLastError();
        throw_unsupported("--backend cuda: no CUDA device is available");
    }
    if (options.device < 0 || options.device >= n_devices) {
        throw_invalid("CUDA device " + std::to_string(options.device) + " does not exist (" +
                      std::to_string(n_devices) + " present)");
    }
    CHERENKOV_CUDA_CHECK(cudaSetDevice(options.device));
    cudaDeviceProp prop{};
    CHERENKOV_CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
    device_name_ = prop.name;
    device_total_bytes_ = prop.totalGlobalMem;
    CHERENKOV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    stage_timer_ = std::make_unique<GpuStageTimer>(stream_);
    prefill_stage_timer_ = std::make_unique<GpuStageTimer>(stream_);
    // Layer temporaries come from the stream-ordered pool (DeviceScratch); keep what it has
    // reserved instead of returning it to the driver at every synchronization.
    cudaMemPool_t mem_pool = nullptr;
    CHERENKOV_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&mem_pool, options.device));
    uint64_t keep_all = UINT64_MAX;
    CHERENKOV_CUDA_CHECK(
        cudaMemPoolSetAttribute(mem_pool, cudaMemPoolAttrReleaseThreshold, &keep_all));

    size_t free_bytes = 0;
    size_t total_bytes = 0;
    CHERENKOV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (weights.resident_bytes() + (1ULL << 30) > free_bytes) {
        throw Error(ErrorKind::ResourceExhausted,
                    "the dense weights (" + std::to_string(weights.resident_bytes()) +
                        " bytes) do not fit in the device's " + std::to_string(free_bytes) +
                        " free bytes with 1 GiB of working room");
    }
    device_ = upload_model_weights(weights);
    const Tuning& tuning = options.tuning;
    kernels_ = kernel_policy_for(options.device, tuning);
    graphs_enabled_ = tuning.cuda_graphs;
    // step_graphs=off keeps the per-layer graphs only, for A/B runs.
    step_graphs_enabled_ = graphs_enabled_ && tuning.step_graphs;
    device_routing_ = tuning.device_routing;
    next_layer_copies_ = tuning.next_layer_copies;
    if (tuning.side_streams) side_ = std::make_unique<SideStreams>();

    // RoPE frequencies exactly as engine::Rope computes them.
    std::vector<float> inv_freq;
    const float base = static_cast<float>(c.rope.rope_theta);
    for (int64_t i = 0; i < c.rotary_dim / 2; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.rotary_dim);
        inv_freq.push_back(1.0F / std::pow(base, exponent));
    }
    rope_inv_freq_ = DeviceBuffer(std::max<size_t>(inv_freq.size(), 1) * sizeof(float));
    if (!inv_freq.empty()) rope_inv_freq_.upload(inv_freq.data(), inv_freq.size() * sizeof(float));

    const int64_t capacity = options.max_ctx + 8;
    for (const LayerWeights& l : weights.layers) trunk_plan_.push_back(plan_layer(c, l, capacity));
    if (weights.mtp) {
        for (const LayerWeights& l : weights.mtp->layers)
            mtp_plan_.push_back(plan_layer(c, l, capacity));
    }

    // The device expert pool: what is left after one sequence's caches, its snapshots and the
    // scratch of a prefill chunk of prefill_quantum rows (activations of every layer's
    // temporaries, generously: prefill_scratch_row_bytes per row, plus slack).
    uint64_t state_floats = 0;
    for (const auto* plans : {&trunk_plan_, &mtp_plan_}) {
        for (const LayerPlan& p : *plans) {
            state_floats += p.gdn_conv + p.gdn_recurrent + p.ple_conv +
                            (p.attention ? 2 * capacity * p.kv_width + capacity * p.index_width +
                                               p.n_block_rows * p.index_width
                                         : 0);
        }
    }
    for (const LayerPlan& p : trunk_plan_)
        state_floats += (p.gdn_conv + p.gdn_recurrent + p.ple_conv) * (options.max_rows + 1);
    ChunkScratch scratch;
    scratch.quantum = options.prefill_quantum.rows();
    scratch.min_rows = std::max<int64_t>(options.max_rows, 1);
    scratch.row_bytes = prefill_scratch_row_bytes(c);
    scratch.fixed_bytes = 512ULL << 20;  // rows-independent temporaries and allocator rounding
    const store::ExpertLayout& layout = experts.layout();
    PoolRequirements req;
    req.slot_bytes = DeviceExpertPool::slot_bytes_for(layout, options.max_bits);
    req.n_table_records = layout.n_records();
    req.step_records = static_cast<uint64_t>(options.max_rows * c.num_experts_per_tok);
    req.fixed_bytes = state_floats * sizeof(float);
    req.reserve_bytes = scratch.bytes(scratch.quantum);
    req.min_headroom_bytes = 1ULL << 30;
    CHERENKOV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    req.measured_usable_bytes = free_bytes;
    const PoolSetting& setting = options.pool;
    if (setting.mode == PoolMode::Explicit && setting.bytes == 0) {
        throw_invalid(
            "--pool-gb 0 is not possible with --backend cuda: routed experts are "
            "computed from the device pool (give at least one layer-step's experts)");
    }
    const PoolBudget budget = resolve_pool_budget(setting, req);
    // A quantum nobody set grows into the memory the pool leaves: beside an explicit pool smaller
    // than the table (the experts stream, and each chunk reads most of the table), or beside a
    // pool that holds the table (the expert GEMMs reuse each weight across more tokens).
    if (options.prefill_quantum.automatic()) {
        scratch.quantum = grown_prefill_quantum(setting, budget, req, scratch,
                                                kStreamingPrefillQuantum, kResidentPrefillQuantum);
    }
    // An explicit pool must leave the quantum's scratch; an adaptive one shrinks the chunk only
    // when it had to be raised to one layer-step's union.
    const ChunkFit chunk = fit_prefill_chunk(setting, budget, req, scratch);
    prefill_rows_ = chunk.rows;
    scratch_reserved_bytes_ = chunk.scratch_bytes;
    if (chunk.rows < options.prefill_quantum.rows()) log_warn("cuda", chunk.description);
    pool_ = std::make_unique<DeviceExpertPool>(layout, static_cast<int64_t>(budget.n_slots),
                                               static_cast<void*>(stream_), options.max_bits,
                                               options.cache_policy);
    register_records(experts.record_memory());
    cpu_experts_ = std::make_unique<CpuExperts>(options.cpu_experts, options.cpu_pool,
                                                options.cpu_activations);
    pool_description_ = "device " + budget.description + ", " + chunk.description;
}

// Page-locked records are copied to device slots by DMA, asynchronously, instead of through the
// driver's pageable bounce buffers (a few times slower). A read-only mapping is registered as
// memory the device only reads; registering faults in and locks every page of it, which takes
// ~80-100 µs per MB (H200 machine), so it is timed.
void CudaBackendOps::register_records(const RecordMemory& records) {
    if (records.bytes.empty()) return;
    void* base = const_cast<std::byte*>(records.bytes.data());
    const auto start = std::chrono::steady_clock::now();
    const unsigned flags = records.read_only ? cudaHostRegisterReadOnly : cudaHostRegisterDefault;
    const cudaError_t status = cudaHostRegister(base, records.bytes.size(), flags);
    if (status != cudaSuccess) {
        cudaGetLastError();  // e.g. over the locked-memory limit: copies still work, slower
        log_warn("cuda", "expert records not page-locked (" + std::to_string(records.bytes.size()) +
                             " bytes: " + cudaGetErrorString(status) +
                             "); copies to the device go through bounce buffers");
        return;
    }
    registered_ = base;
    registered_bytes_ = records.bytes.size();
    if (records.read_only) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        log_info("cuda",
                 "mapped expert table page-locked: " + std::to_string(registered_bytes_ / 1000000) +
                     " MB in " + std::to_string(static_cast<int>(seconds * 1000)) + " ms");
    }
}

SequenceState CudaBackendOps::new_sequence(int64_t max_ctx) const {
    // Host bookkeeping as the CPU model keeps it (make_sequence_state), without the host caches.
    SequenceState s;
    const q4::Config& c = weights_.config;
    if (c.has_ple())
        s.ngram_context.assign(static_cast<size_t>(c.ngram_context_len), c.first_eos());
    const int64_t capacity = std::max<int64_t>(max_ctx, 1) + 8;
    std::vector<LayerPlan> trunk;
    std::vector<LayerPlan> mtp;
    for (const LayerWeights& l : weights_.layers) trunk.push_back(plan_layer(c, l, capacity));
    if (weights_.mtp) {
        for (const LayerWeights& l : weights_.mtp->layers)
            mtp.push_back(plan_layer(c, l, capacity));
    }
    s.backend = BackendStateHandle(std::make_unique<DeviceSequence>(c, trunk, mtp, capacity));
    return s;
}

template <typename Key, typename Body>
bool CudaBackendOps::run_graph(std::map<Key, cudaGraphExec_t>& graphs, std::map<Key, int>& seen,
                               size_t max_graphs, const Key& key, Body&& body, uint64_t& captures,
                               uint64_t& launches) {
    if (const auto it = graphs.find(key); it != graphs.end()) {
        CHERENKOV_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
        ++launches;
        return false;
    }
    // Capture on the second sighting: the first run also grows whatever it needs (staging,
    // arenas), which capture could not do.
    if (++seen[key] < 2) {
        body();
        return true;
    }
    if (graphs.size() >= max_graphs) {
        for (auto& [k, exec] : graphs) cudaGraphExecDestroy(exec);
        graphs.clear();
        seen.clear();
    }
    cudaGraph_t graph = nullptr;
    CHERENKOV_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
        body();
    } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        throw;
    }
    CHERENKOV_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CHERENKOV_CUDA_CHECK(status);
    graphs.emplace(key, exec);
    ++captures;
    CHERENKOV_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    ++launches;
    return true;
}

void CudaBackendOps::clear_graphs() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
    seen_.clear();
    for (auto& [key, exec] : step_graphs_) cudaGraphExecDestroy(exec);
    step_graphs_.clear();
    step_seen_.clear();
}

void CudaBackendOps::grow_arenas() {
    bool grown = false;
    for (DeviceArena* arena : {&call_arena_, &layer_arena_}) {
        if (arena->overflowed()) {
            arena->grow();
            grown = true;
        }
    }
    if (grown) clear_graphs();
}

CudaBackendOps::HeadBuffers::HeadBuffers(int64_t n_rows, int64_t vocab,
                                         const TokenSelection* select, cudaStream_t stream)
    : logits(static_cast<size_t>(n_rows * vocab), stream),
      choices(select != nullptr ? static_cast<size_t>(n_rows) : 0, stream),
      tokens(select != nullptr ? static_cast<size_t>(n_rows) : 0, stream),
      n_rows(n_rows),
      vocab(vocab) {
    // From pageable memory: the call returns once the choices are staged.
    if (select != nullptr) {
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(choices.data(), select->rows.data(),
                                             static_cast<size_t>(n_rows) * sizeof(TokenChoice),
                                             cudaMemcpyHostToDevice, stream));
    }
}

bool CudaBackendOps::step_graph_possible(const ForwardTrace* trace, bool routing_traced,
                                         int64_t n_rows,
                                         std::span<const DeviceLayerWeights> layers) {
    if (!step_graphs_enabled_ || !device_routing_ || trace != nullptr || routing_traced ||
        n_rows > kMaxGemvRows || call_arena_.overflowed() || layer_arena_.overflowed()) {
        return false;
    }
    // Every layer routed on the device: nothing in the step waits for the host. Asked before the
    // step, where moe_on_device may still upload a layer's addresses.
    const DeviceContext ctx = context(nullptr);
    int indexers = 0;
    int qsa_layers = 0;
    for (const DeviceLayerWeights& w : layers) {
        if (moe_on_device(w.moe, n_rows, ctx) == nullptr) return false;
        if (w.qsa) {
            ++qsa_layers;
            indexers += w.qsa->has_indexer ? 1 : 0;
        }
    }
    return indexers == 0 || indexers == qsa_layers;  // one launch shape for every QSA layer
}

template <typename Step>
void CudaBackendOps::run_step_graph(StepKey key, std::span<const DeviceLayerWeights> layers,
                                    std::span<DeviceLayerState> states, int64_t position,
                                    Step&& step) {
    const q4::Config& c = weights_.config;
    // Every QSA layer has the same launch shape (step_graph_possible checked they agree on the
    // indexer): the first one's.
    const auto qsa = std::find_if(layers.begin(), layers.end(),
                                  [](const DeviceLayerWeights& w) { return w.qsa.has_value(); });
    if (qsa != layers.end()) {
        key.qsa = qsa_launch_shape(c, qsa->qsa->has_indexer, position, key.n_rows);
    }
    key.call_arena = call_arena_.base();
    key.call_generation = call_arena_.generation();
    key.layer_arena = layer_arena_.base();
    key.layer_generation = layer_arena_.generation();
    in_step_graph_ = true;
    bool ran = false;
    try {
        ran = run_graph(step_graphs_, step_seen_, kMaxStepGraphs, key, step, step_graph_captures_,
                        step_graph_launches_);
    } catch (...) {
        in_step_graph_ = false;
        throw;
    }
    in_step_graph_ = false;
    if (!ran) {
        // A replay: the host side of what the step's body would have done.
        const int64_t ratio = c.indexer ? c.indexer->compress_ratio : 0;
        for (size_t l = 0; l < layers.size(); ++l) {
            if (layers[l].qsa) sparse_attention_advance(states[l].attention, key.n_rows, ratio);
        }
    }
    // One release event for every layer's slots, after the step.
    for (const DeviceLayerWeights& w : layers) {
        pool_->release_layer(w.moe.table_layer);
        ++device_routed_calls_;
    }
}

GpuStageTotals CudaBackendOps::gpu_stage_totals() const {
    return stage_timer_->totals();
}

GpuStageTotals CudaBackendOps::prefill_gpu_stage_totals() const {
    return prefill_stage_timer_->totals();
}

BackendStats CudaBackendOps::backend_stats() const {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    DeviceFigures d;
    d.name = device_name_;
    d.total_bytes = total_bytes;
    d.free_bytes = free_bytes;
    d.weights_bytes = device_->bytes();
    d.expert_pool_bytes = pool_->bytes();
    d.expert_pool = pool_description_;
    d.host_records_page_locked_bytes = registered_bytes_;
    d.graphs = graphs_enabled_;
    d.side_streams = side_ != nullptr;
    d.graph_captures = graph_captures_;
    d.graph_launches = graph_launches_;
    d.step_graphs = step_graphs_enabled_;
    d.step_graph_captures = step_graph_captures_;
    d.step_graph_launches = step_graph_launches_;
    d.scratch_bytes = call_arena_.capacity() + layer_arena_.capacity();
    d.scratch_reserved_bytes = scratch_reserved_bytes_;
    d.prefill_rows_per_call = prefill_rows_;
    d.routing = device_routing_;
    for (const DeviceLayerWeights& l : device_->layers)
        d.shared_expert_layers_on_expert_kernels += l.moe.shared_expert != nullptr ? 1 : 0;
    d.routed_layers = pool_->n_layers_on_device();
    d.routed_calls = device_routed_calls_;
    d.decode_phases = decode_phases_.to_json();
    const CpuExpertsFigures cpu = cpu_experts_->figures();
    d.cpu_experts = cpu_experts_->enabled() ? cpu_experts_->setting().name() : "off";
    d.cpu_experts_computed = cpu.computed;
    d.cpu_experts_seconds = cpu.seconds;
    d.cpu_experts_copied = cpu.copied;
    d.cpu_experts_share = cpu.share;
    d.cpu_experts_activations = activation_precision_name(cpu_experts_->activations());
    d.experts_copied_ahead = pool_->copied_ahead();
    d.experts_used_ahead = pool_->used_ahead();
    const TierCounters counters = pool_->counters();
    d.pool = DevicePoolCounters{.hits = counters.hits,
                                .uploads = counters.misses,
                                .upload_bytes = counters.fill_bytes,
                                .evictions = counters.evictions};
    return BackendStats{.device = std::move(d)};
}

}  // namespace

std::unique_ptr<ModelBackend> make_cuda_model(const ModelWeights& weights, ExpertSource& experts,
                                              const CudaModelOptions& options) {
    return std::make_unique<ComposedModel>(
        weights, experts, std::make_unique<CudaBackendOps>(weights, experts, options));
}

}  // namespace cherenkov::engine::cuda
