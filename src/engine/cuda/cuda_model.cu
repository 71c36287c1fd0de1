// The CUDA ModelBackend (cuda_model.h): host bookkeeping shared with the CPU model
// (sequence_bookkeeping.h), device caches per sequence (DeviceSequence), and the decoder layers of
// device_layers.cuh composed exactly as engine/model/model.cpp composes the CPU ones. Kernels
// wait for the previous kernel before touching memory and are launched with launch_dependent
// (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <compare>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/kernel_policy.h"
#include "engine/cuda/token_select.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/pool_budget.h"
#include "engine/model/ops.h"
#include "engine/model/sequence_bookkeeping.h"

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
        return copy;
    }

    uint64_t bytes() const override { return caches_.size() + snapshots_.size(); }
    int64_t capacity() const { return capacity_; }

    // Saved form: a header (capacity, layer counts, each layer's attention length and block-key
    // count), then per layer its recurrent and convolution states and the valid rows of its
    // attention caches, in carve() order. Copies are synchronous: parking happens between steps.
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
        walk(*this, [&](const float* device, int64_t floats) {
            put(device, static_cast<size_t>(floats) * sizeof(float), cudaMemcpyDeviceToHost);
        }, [&](const DeviceAttentionCache& a) {
            put_value(a.length);
            put_value(a.n_block_keys);
        });
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
        walk(*this, [&](float* device, int64_t floats) {
            take(device, static_cast<size_t>(floats) * sizeof(float), cudaMemcpyHostToDevice);
        }, [&](DeviceAttentionCache& a) {
            const int64_t length = take_value();
            const int64_t blocks = take_value();
            if (length < 0 || length > a.capacity || blocks < 0 || blocks > length) {
                throw_corrupt("a parked sequence state has attention lengths out of range");
            }
            a.length = length;
            a.n_block_keys = blocks;
        });
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
    }

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

    const q4::Config* config_;
    std::vector<LayerPlan> trunk_plan_, mtp_plan_;
    int64_t capacity_;
    DeviceBuffer caches_;
    DeviceBuffer snapshots_;
    int64_t snapshot_rows_ = 0;
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

DeviceSequence& device_state(SequenceState& state) {
    auto* d = dynamic_cast<DeviceSequence*>(state.backend.get());
    if (d == nullptr) throw_internal("a sequence state made by another backend was given to cuda");
    return *d;
}

class CudaModel final : public ModelBackend {
public:
    CudaModel(const ModelWeights& weights, ExpertSource& experts, const CudaModelOptions& options);
    ~CudaModel() override {
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
    const q4::Config& config() const override { return weights_.config; }
    bool has_mtp() const override { return weights_.mtp.has_value(); }
    SequenceState new_sequence(int64_t max_ctx) const override;
    void set_routing_trace(std::ostream* out) override { routing_trace_ = out; }
    ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                          const ForwardOptions& options) override;
    void commit(SequenceState& state, int64_t n_rows) override;
    MtpResult mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                           ForwardTrace* trace, const TokenSelection* select) override;
    MtpResult mtp_chain(SequenceState& state, std::span<const float> previous_residual,
                        int32_t token, int64_t position, int64_t step,
                        const TokenSelection* select) override;
    BackendStats backend_stats() const override;
    GpuStageTotals gpu_stage_totals() const override;
    int64_t max_rows_per_call() const override { return prefill_rows_; }

private:
    DeviceContext context(ForwardTrace* trace, std::string prefix);
    void decoder_layer(const DeviceLayerWeights& w, const DeviceLayerWeights* next,
                       DeviceLayerState& state, const float* ple_embedding, float* x,
                       int64_t n_rows, int64_t first_position, DeviceContext& ctx);
    // Logits of a call's rows through a final mixer and lm_head, in three parts so that a captured
    // step holds the head's kernels: the buffers (HeadBuffers: the logits, and with a selection
    // the choices, uploaded, and the ids), the launches (head_launch: the tokens picked on the
    // device, token_select.h), the read-back (head_collect: the ids, plus the logits without a
    // selection or when select->keep_logits).
    struct HeadBuffers {
        HeadBuffers(int64_t n_rows, int64_t vocab, const TokenSelection* select,
                    cudaStream_t stream);
        DeviceScratch<float> logits;
        DeviceScratch<TokenChoice> choices;  // empty without a selection
        DeviceScratch<int32_t> tokens;
        int64_t n_rows;
        int64_t vocab;
    };
    void head_launch(const DeviceHyperConnectionWeights& mixer, const DeviceLinear& lm_head,
                     const float* x, ForwardTrace* trace, const char* trace_name, HeadBuffers& out);
    void head_collect(const TokenSelection* select, const HeadBuffers& out,
                      std::vector<float>& logits, std::vector<int32_t>& tokens);
    MtpResult mtp_rows(SequenceState& state, const float* residuals,
                       std::span<const int32_t> tokens, int64_t first_position, int64_t step,
                       bool all_logits, ForwardTrace* trace, const TokenSelection* select);
    // The bodies of forward() and mtp_rows(), run with the call arena active.
    ForwardResult forward_in_arena(SequenceState& state, std::span<const int32_t> tokens,
                                   const ForwardOptions& options);
    MtpResult mtp_rows_in_arena(SequenceState& state, const float* residuals,
                                std::span<const int32_t> tokens, int64_t first_position,
                                int64_t step, bool all_logits, ForwardTrace* trace,
                                const TokenSelection* select);
    void check_tokens(std::span<const int32_t> tokens) const;
    void download(float* host, const float* device, int64_t n) const;

    // The arguments a captured decode segment baked in: equal keys replay the same graph.
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
    // Returns whether `body` ran (false: the graph was replayed).
    template <typename Body>
    bool run_segment(const SegmentKey& key, Body&& body);
    // Replays the graph captured for `key`, or runs `body` (the first time a key is seen) or
    // captures it (the second time) and launches that. Returns whether `body` ran.
    template <typename Key, typename Body>
    bool run_graph(std::map<Key, cudaGraphExec_t>& graphs, std::map<Key, int>& seen,
                   size_t max_graphs, const Key& key, Body&& body, uint64_t& captures,
                   uint64_t& launches);

    // A whole decode step as one graph, when every layer is routed on the device: from the
    // embedding to the token selection. What varies from step to step is device data (the
    // position, the tokens, the n-gram rows, the choices, uploaded before the launch); the key
    // holds what the launches bake in.
    struct StepKey {
        int64_t mtp_layer;  // -1: the trunk's layers; else the MTP layer of the call
        int64_t n_rows;
        bool all_logits;
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
    // Whether a call of n_rows through `layers` can be one graph: graphs on, no trace, every
    // layer routed on the device.
    bool step_graph_possible(const ForwardTrace* trace, int64_t n_rows,
                             std::span<const DeviceLayerWeights> layers);
    // Runs, captures or replays `step` (the whole call) under `key` (its arenas and QSA shape
    // filled in here), then does the host side of a replay and releases the layers' slots.
    template <typename Step>
    void run_step_graph(StepKey key, std::span<const DeviceLayerWeights> layers,
                        std::span<DeviceLayerState> states, int64_t position, Step&& step);
    void clear_graphs();
    // Grows an arena a call overflowed (between calls: nothing of it is alive then).
    void grow_arenas();

    const ModelWeights& weights_;
    ExpertSource& experts_;
    CudaModelOptions options_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<DeviceModelWeights> device_;
    DeviceBuffer rope_inv_freq_;
    std::unique_ptr<DeviceExpertPool> pool_;
    std::string pool_description_;
    int64_t prefill_rows_ = 1;             // rows per prefill call the scratch reservation covers
    uint64_t scratch_reserved_bytes_ = 0;  // kept outside the pool for those rows
    std::vector<LayerPlan> trunk_plan_, mtp_plan_;
    std::ostream* routing_trace_ = nullptr;
    int64_t trace_step_ = 0;
    std::string device_name_;
    uint64_t device_total_bytes_ = 0;
    // Page-locks the source's record region, if it has one.
    void register_records(const RecordMemory& records);

    void* registered_ = nullptr;  // the host records' page-locked region, if any
    uint64_t registered_bytes_ = 0;
    DeviceArena call_arena_;   // a call's temporaries outside the layers
    DeviceArena layer_arena_;  // one layer's temporaries, reset per layer
    bool graphs_enabled_ = true;
    bool step_graphs_enabled_ = true;
    bool device_routing_ = true;  // device_routing=off: every layer routed by the host
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
    mutable std::unique_ptr<GpuStageTimer> stage_timer_;  // made once stream_ exists
    uint64_t device_routed_calls_ = 0;  // MoE layer calls routed on the device
};

CudaModel::CudaModel(const ModelWeights& weights, ExpertSource& experts,
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
    validate_prefill_quantum(options.prefill_quantum);
    ChunkScratch scratch;
    scratch.quantum = options.prefill_quantum;
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
    // An explicit pool must leave the quantum's scratch; an adaptive one shrinks the chunk only
    // when it had to be raised to one layer-step's union.
    const ChunkFit chunk = fit_prefill_chunk(setting, budget, req, scratch);
    prefill_rows_ = chunk.rows;
    scratch_reserved_bytes_ = chunk.scratch_bytes;
    if (chunk.rows < options.prefill_quantum) log_warn("cuda", chunk.description);
    pool_ = std::make_unique<DeviceExpertPool>(layout, static_cast<int64_t>(budget.n_slots),
                                               static_cast<void*>(stream_), options.max_bits,
                                               options.cache_policy);
    register_records(experts.record_memory());
    pool_description_ = "device " + budget.description + ", " + chunk.description;
}

// Page-locked records are copied to device slots by DMA, asynchronously, instead of through the
// driver's pageable bounce buffers (a few times slower). A read-only mapping is registered as
// memory the device only reads; registering faults in and locks every page of it, which takes
// ~80-100 µs per MB (H200 machine), so it is timed.
void CudaModel::register_records(const RecordMemory& records) {
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

void CudaModel::check_tokens(std::span<const int32_t> tokens) const {
    check_token_ids(weights_.config, tokens);
}

void CudaModel::download(float* host, const float* device, int64_t n) const {
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<size_t>(n) * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

SequenceState CudaModel::new_sequence(int64_t max_ctx) const {
    // Host bookkeeping as the CPU model keeps it (make_sequence_state), without the host caches.
    SequenceState s;
    const q4::Config& c = weights_.config;
    if (c.has_ple())
        s.ngram_context.assign(static_cast<size_t>(c.ngram_context_len), c.first_eos());
    const int64_t capacity = std::max<int64_t>(max_ctx, 1) + 8;
    std::vector<LayerPlan> trunk;
    std::vector<LayerPlan> mtp;
    for (const LayerWeights& l : weights_.layers)
        trunk.push_back(plan_layer(config(), l, capacity));
    if (weights_.mtp) {
        for (const LayerWeights& l : weights_.mtp->layers)
            mtp.push_back(plan_layer(config(), l, capacity));
    }
    s.backend =
        BackendStateHandle(std::make_unique<DeviceSequence>(config(), trunk, mtp, capacity));
    return s;
}

DeviceContext CudaModel::context(ForwardTrace* trace, std::string prefix) {
    DeviceContext ctx;
    ctx.config = &weights_.config;
    ctx.stream = stream_;
    ctx.rope_inv_freq = rope_inv_freq_.as<float>();
    ctx.experts = &experts_;
    ctx.expert_pool = pool_.get();
    ctx.side = side_.get();
    ctx.trace = trace;
    ctx.trace_prefix = std::move(prefix);
    ctx.routing_trace = routing_trace_;
    ctx.trace_step = trace_step_++;
    return ctx;
}

void CudaModel::decoder_layer(const DeviceLayerWeights& w, const DeviceLayerWeights* next,
                              DeviceLayerState& state, const float* ple_embedding, float* x,
                              int64_t n_rows, int64_t first_position, DeviceContext& ctx) {
    const q4::Config& c = weights_.config;
    const int64_t h = c.hidden_size;
    const int64_t n_streams = c.hc_count;
    const int64_t width = c.hc_width();
    // Every temporary of the layer comes from the layer arena, at the same addresses each step.
    const ArenaScope arena(&layer_arena_);
    // A decode call's layer times the host's phases if it is routed on the host (moe_finish).
    ctx.phases = n_rows <= kMaxGemvRows && ctx.trace == nullptr ? &decode_phases_ : nullptr;
    if (ctx.phases != nullptr) decode_phases_.layer_start = DecodePhases::Clock::now();

    DeviceScratch<float> mix(static_cast<size_t>(n_rows * h), stream_);
    DeviceScratch<float> inject(static_cast<size_t>(n_rows * n_streams), stream_);
    DeviceScratch<float> y(static_cast<size_t>(n_rows * h), stream_);
    const DeviceMoeWeights* next_moe = next != nullptr ? &next->moe : nullptr;
    // A layer the device pool holds whole is routed on the device: nothing in it waits for the
    // host, and a decode step of a GDN layer is then one graph.
    const ExpertAddress* on_device = device_routing_ ? moe_on_device(w.moe, n_rows, ctx) : nullptr;
    // Everything up to the routing read-back (or the whole layer, routed on the device): no host
    // decision depends on data in between.
    const auto front = [&] {
        if (w.ple) ple_forward(*w.ple, state.ple, ple_embedding, x, n_rows, ctx);
        hyper_connection_mix(w.attn_hc, x, n_rows, ctx, mix.data(), inject.data());
        ctx.record("attn_hc.mix", mix.data(), n_rows * h);
        ctx.record("attn_hc.inject", inject.data(), n_rows * n_streams);
        if (w.gdn) {
            gated_deltanet_forward(*w.gdn, state.gdn, mix.data(), n_rows, y.data(), ctx);
        } else {
            sparse_attention_forward(*w.qsa, state.attention, mix.data(), n_rows, first_position,
                                     y.data(), ctx);
        }
        ctx.record("mixer_out", y.data(), n_rows * h);
        hyper_connection_combine(x, inject.data(), y.data(), n_rows, n_streams, h, stream_);
        ctx.record("x_mid", x, n_rows * width);

        hyper_connection_mix(w.mlp_hc, x, n_rows, ctx, mix.data(), inject.data());
        ctx.record("mlp_hc.mix", mix.data(), n_rows * h);
        ctx.record("mlp_hc.inject", inject.data(), n_rows * n_streams);
        if (on_device != nullptr) {
            moe_forward_on_device(w.moe, on_device, mix.data(), n_rows, y.data(), ctx,
                                  ResidualUpdate{x, inject.data(), n_streams});
        } else {
            moe_route(w.moe, next_moe, mix.data(), n_rows, ctx);
        }
    };
    // Decode calls replay that front as one CUDA graph: its kernels' arguments are the same every
    // step but for what the key holds (a QSA layer's launch shape changes with the position,
    // which its kernels read on the device); traces read back. A step routed wholly on the device
    // is one graph instead (run_step_graph).
    const bool graph = !in_step_graph_ && graphs_enabled_ && ctx.trace == nullptr &&
                       n_rows <= kMaxGemvRows && !layer_arena_.overflowed();
    if (graph) {
        const SegmentKey key{&w,
                             n_rows,
                             x,
                             ctx.position,
                             state.gdn.recurrent,
                             state.gdn.conv,
                             ctx.gdn_recurrent_snapshots,
                             ctx.gdn_conv_snapshots,
                             w.ple ? ple_embedding : nullptr,
                             state.ple.conv,
                             w.ple ? ctx.ple_conv_snapshots : nullptr,
                             state.attention.keys,
                             w.qsa ? qsa_launch_shape(c, w.qsa->has_indexer, first_position, n_rows)
                                   : QsaLaunchShape{},
                             pool_->host_staging(0),
                             layer_arena_.base(),
                             layer_arena_.generation(),
                             on_device};
        const bool ran = run_segment(key, front);
        // A replay: the host side of what the QSA call would have done.
        if (!ran && w.qsa) {
            sparse_attention_advance(state.attention, n_rows,
                                     c.indexer ? c.indexer->compress_ratio : 0);
        }
    } else {
        front();
    }
    if (on_device != nullptr) {
        // Inside a whole-step graph the step releases every layer after its launch.
        if (!in_step_graph_) {
            pool_->release_layer(w.moe.table_layer);
            ++device_routed_calls_;
        }
    } else {
        CHERENKOV_ASSERT(!in_step_graph_,
                         "a whole-step graph has every layer routed on the device");
        moe_finish(w.moe, next_moe, mix.data(), n_rows, y.data(), ctx,
                   ResidualUpdate{x, inject.data(), n_streams});
    }
    ctx.record("x_out", x, n_rows * width);
}

template <typename Body>
bool CudaModel::run_segment(const SegmentKey& key, Body&& body) {
    return run_graph(graphs_, seen_, kMaxGraphs, key, body, graph_captures_, graph_launches_);
}

template <typename Key, typename Body>
bool CudaModel::run_graph(std::map<Key, cudaGraphExec_t>& graphs, std::map<Key, int>& seen,
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

void CudaModel::clear_graphs() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
    seen_.clear();
    for (auto& [key, exec] : step_graphs_) cudaGraphExecDestroy(exec);
    step_graphs_.clear();
    step_seen_.clear();
}

void CudaModel::grow_arenas() {
    bool grown = false;
    for (DeviceArena* arena : {&call_arena_, &layer_arena_}) {
        if (arena->overflowed()) {
            arena->grow();
            grown = true;
        }
    }
    if (grown) clear_graphs();
}

CudaModel::HeadBuffers::HeadBuffers(int64_t n_rows, int64_t vocab, const TokenSelection* select,
                                    cudaStream_t stream)
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

void CudaModel::head_launch(const DeviceHyperConnectionWeights& mixer, const DeviceLinear& lm_head,
                            const float* x, ForwardTrace* trace, const char* trace_name,
                            HeadBuffers& out) {
    const int64_t h = weights_.config.hidden_size;
    const int64_t n_rows = out.n_rows;
    DeviceContext ctx = context(trace, "");
    --trace_step_;  // the head is part of the call that asked for it
    DeviceScratch<float> mix(static_cast<size_t>(n_rows * h), stream_);
    hyper_connection_mix(mixer, x, n_rows, ctx, mix.data(), nullptr);
    ctx.record(trace_name, mix.data(), n_rows * h);
    linear_apply(lm_head, mix.data(), n_rows, out.logits.data(), stream_);
    if (out.tokens.size() == 0) return;
    // With the selection scratch every row's largest key is found over many blocks (greedy rows
    // too: one block per row took ~10 µs at vocab 32768).
    DeviceScratch<uint64_t> scratch(
        static_cast<size_t>(n_rows * token_select_scratch_words(out.vocab)), stream_);
    token_select(out.logits.data(), n_rows, out.vocab, out.choices.data(), scratch.data(),
                 out.tokens.data(), stream_);
}

void CudaModel::head_collect(const TokenSelection* select, const HeadBuffers& out,
                             std::vector<float>& logits, std::vector<int32_t>& tokens) {
    const int64_t vocab = out.vocab;
    if (select == nullptr || select->keep_logits) {
        logits.resize(static_cast<size_t>(out.n_rows * vocab));
        download(logits.data(), out.logits.data(), out.n_rows * vocab);
    }
    if (select == nullptr) return;
    tokens.resize(static_cast<size_t>(out.n_rows));
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(tokens.data(), out.tokens.data(),
                                         tokens.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                         stream_));
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const int32_t token : tokens) {
        if (token < 0 || token >= vocab) {
            throw_internal("token_select returned token " + std::to_string(token));
        }
    }
}

ForwardResult CudaModel::forward(SequenceState& state, std::span<const int32_t> tokens,
                                 const ForwardOptions& options) {
    ForwardResult result;
    {
        const ArenaScope arena(&call_arena_);
        const KernelScope kernels(kernels_);
        const LaunchOverlapScope overlap(static_cast<int64_t>(tokens.size()) <= kMaxGemvRows);
        result = forward_in_arena(state, tokens, options);
    }
    grow_arenas();
    return result;
}

ForwardResult CudaModel::forward_in_arena(SequenceState& state, std::span<const int32_t> tokens,
                                          const ForwardOptions& options) {
    const q4::Config& c = weights_.config;
    check_tokens(tokens);
    const auto n_rows = static_cast<int64_t>(tokens.size());
    ForwardResult result;
    if (n_rows == 0) return result;
    if (options.select != nullptr) {
        check_selection_rows(*options.select, options.all_logits ? n_rows : 1,
                             "ForwardOptions::select");
    }
    DeviceSequence& dev = device_state(state);
    if (state.position + n_rows > dev.capacity()) {
        throw_invalid("the context holds " + std::to_string(dev.capacity()) +
                      " tokens on the device; this call would reach " +
                      std::to_string(state.position + n_rows));
    }
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();

    // N-gram rows gathered on the host, dequantized, and copied for the PLE layers.
    std::vector<std::vector<int64_t>> ngram_ids;
    const std::vector<int64_t> next_context = layer_ngram_ids(weights_, state, tokens, ngram_ids);
    std::vector<std::unique_ptr<DeviceScratch<float>>> ple_rows;
    for (size_t l = 0; l < weights_.layers.size(); ++l) {
        const bool has = weights_.layers[l].ple.has_value();
        const int64_t p_dim = c.ple_embed_dim;
        ple_rows.push_back(std::make_unique<DeviceScratch<float>>(
            has ? static_cast<size_t>(n_rows * p_dim) : 0, stream_));
        if (!has) continue;
        const PleWeights& ple = *weights_.layers[l].ple;
        std::vector<float> rows(static_cast<size_t>(n_rows * p_dim));
        const int64_t n_heads = c.n_ngram_heads;
        for (int64_t t = 0; t < n_rows; ++t) {
            for (int64_t j = 0; j < n_heads; ++j) {
                ple.gather_row(ngram_ids[l][static_cast<size_t>(t * n_heads + j)],
                               rows.data() + t * p_dim + j * ple.width);
            }
        }
        // From pageable memory: the call returns once `rows` has been consumed.
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(ple_rows.back()->data(), rows.data(),
                                             rows.size() * sizeof(float), cudaMemcpyHostToDevice,
                                             stream_));
    }

    // A decode call (no trace) is one GPU timing window, from its inputs' upload to its head.
    const bool timed = n_rows <= kMaxGemvRows && options.trace == nullptr;
    if (timed) stage_timer_->begin_window();
    // The step's variable inputs in one upload: the position (QSA kernels read it on the device)
    // and the token ids.
    StepInputs inputs(state.position, tokens, stream_);
    DeviceScratch<float> x(static_cast<size_t>(n_rows * width), stream_);
    DeviceScratch<float> embedded(static_cast<size_t>(n_rows * h), stream_);

    if (options.snapshot_rows) {
        dev.reserve_snapshots(n_rows);
        state.snapshot_base = state.position;
        state.n_snapshot_rows = n_rows;
    } else {
        state.n_snapshot_rows = 0;
    }
    state.row_snapshots.clear();

    const int64_t first = options.all_logits ? 0 : n_rows - 1;
    result.n_logit_rows = n_rows - first;
    HeadBuffers head_out(result.n_logit_rows, c.vocab_size, options.select, stream_);

    DeviceContext ctx = context(options.trace, "");
    ctx.position = inputs.position();
    if (timed) ctx.stages = stage_timer_.get();
    const auto step = [&] {
        launch_dependent(embed_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(256), 0, stream_,
                         device_->embed, inputs.tokens(), c.hc_count, x.data(), embedded.data());
        ctx.record("embed", embedded.data(), n_rows * h);
        for (size_t l = 0; l < device_->layers.size(); ++l) {
            if (options.trace != nullptr) ctx.trace_prefix = "layers." + std::to_string(l) + ".";
            if (options.snapshot_rows) {
                const auto snaps = dev.snapshots_of(l);
                ctx.gdn_recurrent_snapshots = snaps.recurrent;
                ctx.gdn_conv_snapshots = snaps.conv;
                ctx.ple_conv_snapshots = snaps.ple;
            }
            const DeviceLayerWeights* next =
                l + 1 < device_->layers.size() ? &device_->layers[l + 1] : nullptr;
            decoder_layer(device_->layers[l], next, dev.layers[l], ple_rows[l]->data(), x.data(),
                          n_rows, state.position, ctx);
        }
        head_launch(device_->final_mixer, device_->lm_head, x.data() + first * width, options.trace,
                    "final_hidden", head_out);
    };
    experts_.begin_step();
    if (step_graph_possible(options.trace, n_rows, device_->layers)) {
        StepKey key{};
        key.mtp_layer = -1;
        key.n_rows = n_rows;
        key.all_logits = options.all_logits;
        key.select = options.select != nullptr;
        key.snapshot_rows = options.snapshot_rows;
        key.caches = dev.caches();
        key.snapshots = dev.snapshots();
        key.snapshot_capacity = dev.snapshot_rows();
        run_step_graph(key, device_->layers, dev.layers, state.position, step);
    } else {
        step();
    }
    experts_.end_step();
    if (timed) stage_timer_->end_window();

    if (options.keep_residuals) {
        const size_t at = state.pending_residuals.size();
        state.pending_residuals.resize(at + static_cast<size_t>(n_rows * width));
        download(state.pending_residuals.data() + at, x.data(), n_rows * width);
    }
    head_collect(options.select, head_out, result.logits, result.tokens);

    state.position += n_rows;
    state.tokens.insert(state.tokens.end(), tokens.begin(), tokens.end());
    state.ngram_context = next_context;
    return result;
}

bool CudaModel::step_graph_possible(const ForwardTrace* trace, int64_t n_rows,
                                    std::span<const DeviceLayerWeights> layers) {
    if (!step_graphs_enabled_ || !device_routing_ || trace != nullptr ||
        routing_trace_ != nullptr || n_rows > kMaxGemvRows || call_arena_.overflowed() ||
        layer_arena_.overflowed()) {
        return false;
    }
    // Every layer routed on the device: nothing in the step waits for the host. Asked before the
    // step, where moe_on_device may still upload a layer's addresses.
    DeviceContext ctx = context(nullptr, "");
    --trace_step_;
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
void CudaModel::run_step_graph(StepKey key, std::span<const DeviceLayerWeights> layers,
                               std::span<DeviceLayerState> states, int64_t position, Step&& step) {
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

void CudaModel::commit(SequenceState& state, int64_t n_rows) {
    const q4::Config& c = weights_.config;
    check_commit(state, n_rows);
    DeviceSequence& dev = device_state(state);
    const int64_t keep = state.snapshot_base + n_rows;
    if (keep < state.position) {
        const auto row = static_cast<size_t>(n_rows - 1);
        for (size_t l = 0; l < weights_.layers.size(); ++l) {
            DeviceLayerState& layer = dev.layers[l];
            const LayerPlan& p = dev.plan(l);
            const auto snaps = dev.snapshots_of(l);
            const auto restore = [&](float* to, const float* from, int64_t n) {
                CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(to, from + row * n, n * sizeof(float),
                                                     cudaMemcpyDeviceToDevice, stream_));
            };
            if (weights_.layers[l].gdn) {
                restore(layer.gdn.recurrent, snaps.recurrent, p.gdn_recurrent);
                restore(layer.gdn.conv, snaps.conv, p.gdn_conv);
            }
            if (weights_.layers[l].ple) restore(layer.ple.conv, snaps.ple, p.ple_conv);
            if (weights_.layers[l].qsa) {
                layer.attention.truncate(keep, c.indexer ? c.indexer->compress_ratio : 0);
            }
        }
        commit_bookkeeping(c, state, keep);
    }
    state.n_snapshot_rows = 0;
}

MtpResult CudaModel::mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                                  ForwardTrace* trace, const TokenSelection* select) {
    if (!has_mtp()) throw_internal("mtp_catch_up on a model without MTP weights");
    const int64_t first = state.mtp_length;
    const std::vector<int32_t> tokens = mtp_catch_up_tokens(weights_.config, state, next_token);
    const int64_t ratio = weights_.config.indexer ? weights_.config.indexer->compress_ratio : 0;
    for (DeviceLayerState& layer : device_state(state).mtp_layers)
        layer.attention.truncate(first, ratio);
    MtpResult result = mtp_rows(state, state.pending_residuals.data(), tokens, first, 0, all_logits,
                                trace, select);
    state.pending_residuals.clear();
    state.mtp_length = state.position;
    return result;
}

MtpResult CudaModel::mtp_chain(SequenceState& state, std::span<const float> previous_residual,
                               int32_t token, int64_t position, int64_t step,
                               const TokenSelection* select) {
    const int32_t tokens[1] = {token};
    check_tokens(tokens);
    DeviceSequence& dev = device_state(state);
    DeviceLayerState& layer = dev.mtp_layers[static_cast<size_t>(step) % dev.mtp_layers.size()];
    layer.attention.truncate(position,
                             weights_.config.indexer ? weights_.config.indexer->compress_ratio : 0);
    return mtp_rows(state, previous_residual.data(), tokens, position, step, false, nullptr,
                    select);
}

MtpResult CudaModel::mtp_rows(SequenceState& state, const float* residuals,
                              std::span<const int32_t> tokens, int64_t first_position, int64_t step,
                              bool all_logits, ForwardTrace* trace, const TokenSelection* select) {
    if (select != nullptr) {
        check_selection_rows(*select, all_logits ? static_cast<int64_t>(tokens.size()) : 1,
                             "the MTP select");
    }
    MtpResult result;
    {
        const ArenaScope arena(&call_arena_);
        const KernelScope kernels(kernels_);
        const LaunchOverlapScope overlap(static_cast<int64_t>(tokens.size()) <= kMaxGemvRows);
        result = mtp_rows_in_arena(state, residuals, tokens, first_position, step, all_logits,
                                   trace, select);
    }
    grow_arenas();
    return result;
}

MtpResult CudaModel::mtp_rows_in_arena(SequenceState& state, const float* residuals,
                                       std::span<const int32_t> tokens, int64_t first_position,
                                       int64_t step, bool all_logits, ForwardTrace* trace,
                                       const TokenSelection* select) {
    const q4::Config& c = weights_.config;
    const DeviceMtpWeights& mtp = *device_->mtp;
    const int64_t h = c.hidden_size;
    const int64_t width = c.hc_width();
    const auto n_rows = static_cast<int64_t>(tokens.size());
    const size_t layer_index = static_cast<size_t>(step) % mtp.layers.size();
    DeviceSequence& dev = device_state(state);
    DeviceContext ctx = context(trace, "mtp.");
    const bool timed = n_rows <= kMaxGemvRows && trace == nullptr;
    if (timed) {
        stage_timer_->begin_window();
        ctx.stages = stage_timer_.get();
    }
    const StepInputs inputs(first_position, tokens, stream_);
    ctx.position = inputs.position();

    DeviceScratch<float> replicated(static_cast<size_t>(n_rows * h), stream_);
    DeviceScratch<float> e_hat(static_cast<size_t>(n_rows * h), stream_);
    DeviceScratch<float> fe(static_cast<size_t>(n_rows * h), stream_);
    DeviceScratch<float> h_hat(static_cast<size_t>(n_rows * width), stream_);
    CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(h_hat.data(), residuals,
                                         static_cast<size_t>(n_rows * width) * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_));
    DeviceScratch<float> x(static_cast<size_t>(n_rows * width), stream_);
    MtpResult result;
    const int64_t first = all_logits ? 0 : n_rows - 1;
    result.n_logit_rows = n_rows - first;
    HeadBuffers head_out(result.n_logit_rows, c.vocab_size, select, stream_);

    const DeviceLayerWeights& layer = mtp.layers[layer_index];
    const auto call = [&] {
        // ê, fe, ĥ and U = fc_hidden(ĥ_s) + fe per stream (§6.3).
        launch_dependent(embed_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(256), 0, stream_,
                         mtp.embed, inputs.tokens(), int64_t{1}, replicated.data(), e_hat.data());
        rms_norm_rows(e_hat.data(), mtp.pre_fc_norm_embedding, n_rows, h, h, ctx.eps(),
                      e_hat.data(), stream_);
        ctx.record("e_hat", e_hat.data(), n_rows * h);
        linear_apply(mtp.fc_embedding, e_hat.data(), n_rows, fe.data(), stream_);
        ctx.record("fe", fe.data(), n_rows * h);
        rms_norm_rows(h_hat.data(), mtp.pre_fc_norm_hidden, n_rows, width, width, ctx.eps(),
                      h_hat.data(), stream_);
        ctx.record("h_hat", h_hat.data(), n_rows * width);
        linear_apply(mtp.fc_hidden, h_hat.data(), n_rows * c.hc_count, x.data(), stream_);
        launch_dependent(add_per_stream_kernel, dim3(elementwise_blocks(n_rows * width)), dim3(256),
                         0, stream_, x.data(), fe.data(), n_rows, c.hc_count, h);
        ctx.record("U", x.data(), n_rows * width);

        ctx.trace_prefix = "mtp.layer.";
        decoder_layer(layer, nullptr, dev.mtp_layers[layer_index], nullptr, x.data(), n_rows,
                      first_position, ctx);
        if (trace != nullptr) {
            ctx.trace_prefix.clear();
            ctx.record("mtp.r_prime", x.data(), n_rows * width);
        }
        head_launch(mtp.mixer, mtp.lm_head, x.data() + first * width, trace, "mtp.mixer_out",
                    head_out);
    };
    // A draft call whose layer is routed on the device is one graph, as a trunk step is.
    experts_.begin_step();
    const std::span<const DeviceLayerWeights> layers(&layer, 1);
    if (step_graph_possible(trace, n_rows, layers)) {
        StepKey key{};
        key.mtp_layer = static_cast<int64_t>(layer_index);
        key.n_rows = n_rows;
        key.all_logits = all_logits;
        key.select = select != nullptr;
        key.caches = dev.caches();
        run_step_graph(key, layers, std::span<DeviceLayerState>(&dev.mtp_layers[layer_index], 1),
                       first_position, call);
    } else {
        call();
    }
    experts_.end_step();
    if (timed) stage_timer_->end_window();

    head_collect(select, head_out, result.logits, result.tokens);
    result.last_residual.resize(static_cast<size_t>(width));
    download(result.last_residual.data(), x.data() + (n_rows - 1) * width, width);
    return result;
}

GpuStageTotals CudaModel::gpu_stage_totals() const {
    return stage_timer_->totals();
}

BackendStats CudaModel::backend_stats() const {
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
    return std::make_unique<CudaModel>(weights, experts, options);
}

}  // namespace cherenkov::engine::cuda
