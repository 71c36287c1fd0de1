// The pieces of a decoder layer on the GPU (docs/qwen4_exp.md §3.2-§3.7), mirroring
// engine/model/layers.h function for function: activations are float32 device arrays, row-major
// [T, width], and every call is queued on ctx.stream (nothing here synchronizes unless a trace
// is being recorded or the MoE reads its routing back). For the .cu files of this folder only;
// cuda_model.h is the public face.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/decode_phases.h"
#include "engine/cuda/gpu_stage_timer.cuh"
#include "engine/cuda/device_weights.h"
#include "engine/model/forward_trace.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {
class ExpertSource;
}

namespace cherenkov::engine::cuda {

class CpuExperts;
class DeviceExpertPool;

// A bump allocator over one device buffer for a forward call's temporaries. All work runs on one
// stream, so once the owner resets the arena (where every earlier temporary is dead on the host
// side) the next kernels are ordered after the last readers of the old contents. Addresses repeat
// from step to step, which is what lets a decode segment be captured once as a CUDA graph and
// replayed. Requests that do not fit are counted (`overflow`) and served elsewhere; the owner then
// grows the buffer between calls.
class DeviceArena {
public:
    static constexpr size_t kAlign = 256;

    DeviceArena() = default;
    ~DeviceArena() {
        if (base_ != nullptr) cudaFree(base_);
    }
    DeviceArena(const DeviceArena&) = delete;
    DeviceArena& operator=(const DeviceArena&) = delete;

    // nullptr when the request does not fit (recorded in `wanted`).
    void* take(size_t bytes) {
        const size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
        wanted_ += size;
        if (used_ + size > capacity_) return nullptr;
        void* p = static_cast<char*>(base_) + used_;
        used_ += size;
        return p;
    }
    void reset() {
        high_water_ = std::max(high_water_, wanted_);
        used_ = 0;
        wanted_ = 0;
    }
    // Whether some request since construction or the last grow() did not fit.
    bool overflowed() const { return std::max(high_water_, wanted_) > capacity_; }
    // Replaces the buffer by one holding the largest request total seen (plus room); waits for the
    // device first, since queued kernels may still use the old one.
    void grow() {
        const size_t want = std::max(high_water_, wanted_) * 5 / 4 + (1 << 20);
        CHERENKOV_CUDA_CHECK(cudaDeviceSynchronize());
        if (base_ != nullptr) CHERENKOV_CUDA_CHECK(cudaFree(base_));
        base_ = nullptr;
        capacity_ = 0;
        CHERENKOV_CUDA_CHECK(cudaMalloc(&base_, want));
        capacity_ = want;
        ++generation_;
    }
    const void* base() const { return base_; }
    size_t capacity() const { return capacity_; }
    uint64_t generation() const { return generation_; }

private:
    void* base_ = nullptr;
    size_t capacity_ = 0;
    size_t used_ = 0;
    size_t wanted_ = 0;
    size_t high_water_ = 0;
    uint64_t generation_ = 0;
};

// The arena DeviceScratch takes from on this thread (null: the stream-ordered allocator).
inline thread_local DeviceArena* active_device_arena = nullptr;

// Makes `arena` the active one (reset first) for a scope, restoring the previous one after.
class ArenaScope {
public:
    explicit ArenaScope(DeviceArena* arena) : previous_(active_device_arena) {
        if (arena != nullptr) arena->reset();
        active_device_arena = arena;
    }
    ~ArenaScope() { active_device_arena = previous_; }
    ArenaScope(const ArenaScope&) = delete;
    ArenaScope& operator=(const ArenaScope&) = delete;

private:
    DeviceArena* previous_;
};

// A temporary device array: from the active arena when there is one and it has room, else from
// the stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on `stream`, reused by the
// runtime's pool without a device synchronization).
template <typename T>
class DeviceScratch {
public:
    DeviceScratch(size_t n, cudaStream_t stream) : stream_(stream), n_(n) {
        if (n == 0) return;
        if (active_device_arena != nullptr) {
            data_ = static_cast<T*>(active_device_arena->take(n * sizeof(T)));
            from_arena_ = data_ != nullptr;
        }
        if (data_ == nullptr) {
            void* p = nullptr;
            CHERENKOV_CUDA_CHECK(cudaMallocAsync(&p, n * sizeof(T), stream));
            data_ = static_cast<T*>(p);
        }
    }
    ~DeviceScratch() {
        if (data_ != nullptr && !from_arena_) cudaFreeAsync(data_, stream_);
    }
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;

    T* data() const { return data_; }
    size_t size() const { return n_; }

private:
    cudaStream_t stream_;
    size_t n_;
    T* data_ = nullptr;
    bool from_arena_ = false;
};

// Side streams for independent work inside a layer (projections of one input, two routers):
// fork(main, n) makes side streams [0, n) wait for everything queued on `main` so far; join(main,
// n) makes `main` wait for everything queued on them since. Work order per stream is unchanged,
// so results are the same bits as running it all on `main`. Both calls are stream operations, so
// a captured segment records the branches.
class SideStreams {
public:
    static constexpr int kMax = 3;

    SideStreams() {
        CHERENKOV_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
        for (int i = 0; i < kMax; ++i) {
            CHERENKOV_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
            CHERENKOV_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
        }
    }
    ~SideStreams() {
        for (int i = 0; i < kMax; ++i) {
            cudaStreamDestroy(streams_[i]);
            cudaEventDestroy(done_[i]);
        }
        cudaEventDestroy(forked_);
    }
    SideStreams(const SideStreams&) = delete;
    SideStreams& operator=(const SideStreams&) = delete;

    cudaStream_t get(int i) const { return streams_[i]; }
    void fork(cudaStream_t main, int n) const {
        CHERENKOV_CUDA_CHECK(cudaEventRecord(forked_, main));
        for (int i = 0; i < n; ++i) CHERENKOV_CUDA_CHECK(cudaStreamWaitEvent(streams_[i], forked_));
    }
    void join(cudaStream_t main, int n) const {
        for (int i = 0; i < n; ++i) {
            CHERENKOV_CUDA_CHECK(cudaEventRecord(done_[i], streams_[i]));
            CHERENKOV_CUDA_CHECK(cudaStreamWaitEvent(main, done_[i]));
        }
    }

private:
    cudaStream_t streams_[kMax] = {};
    cudaEvent_t done_[kMax] = {};
    cudaEvent_t forked_ = nullptr;
};

// Per-sequence device caches of one layer (pointers into the sequence's allocation).
struct DeviceGatedDeltaNetState {
    float* conv = nullptr;       // [Kc-1, conv_dim], oldest first
    float* recurrent = nullptr;  // [Hv, dk, dv]
};

struct DevicePleState {
    float* conv = nullptr;  // [(Kp-1)·N, C·H], oldest first
};

// QSA caches, token-major like engine::AttentionCache; lengths are host values.
struct DeviceAttentionCache {
    int64_t capacity = 0;         // tokens the arrays hold (max_ctx)
    int64_t length = 0;           // valid tokens
    float* keys = nullptr;        // [capacity, nKV·D] after k_norm and RoPE
    float* values = nullptr;      // [capacity, nKV·D]
    float* index_keys = nullptr;  // [capacity, dI] raw
    float* block_keys = nullptr;  // [capacity / r, dI]: kB_b of completed blocks
    int64_t n_block_keys = 0;

    void truncate(int64_t n, int64_t compress_ratio) {
        if (n >= length) return;
        length = n;
        if (compress_ratio > 0 && n_block_keys > n / compress_ratio)
            n_block_keys = n / compress_ratio;
    }
};

struct DeviceLayerState {
    DeviceGatedDeltaNetState gdn;
    DevicePleState ple;
    DeviceAttentionCache attention;
};

// What every device layer function needs besides its weights and state.
struct DeviceContext {
    const model_data::qwen4_exp::Config* config = nullptr;
    cudaStream_t stream = nullptr;
    const float* rope_inv_freq = nullptr;  // device [rotary_dim / 2], engine::Rope's values
    // Device: the call's first position. QSA kernels read it there rather than take it as an
    // argument, so a captured decode step replays at whatever position the sequence has reached.
    const int64_t* position = nullptr;
    ExpertSource* experts = nullptr;          // where routed expert records come from (host)
    DeviceExpertPool* expert_pool = nullptr;  // device slots the records are copied into
    // Decode misses computed on the CPU instead (cpu_experts.h), or null: all copied.
    CpuExperts* cpu_experts = nullptr;
    // Decode with records that outlive their batches (a mapped table): how many of the next
    // layer's predicted experts the pool lacks are copied ahead (--tuning next_layer_copies).
    int64_t next_layer_copies = 0;
    // Side streams for independent work, or null (everything on `stream`). Not used while
    // tracing (trace reads synchronize `stream` only).
    const SideStreams* side = nullptr;
    ForwardTrace* trace = nullptr;
    std::string trace_prefix;  // "layers.3." while in layer 3
    // Verification snapshots of the current layer, one per row of the call, or null:
    float* gdn_recurrent_snapshots = nullptr;  // [T, Hv·dk·dv]
    float* gdn_conv_snapshots = nullptr;       // [T, (Kc-1)·conv_dim]
    float* ple_conv_snapshots = nullptr;       // [T, (Kp-1)·N·C·H]
    std::ostream* routing_trace = nullptr;
    int64_t trace_step = 0;
    // Host phase timing of the current layer when it is a timed decode call, else null.
    DecodePhases* phases = nullptr;
    // GPU stage marks of a timed decode or MTP call, else null: Pause before the host blocks on
    // the GPU or on expert reads, Resume before it queues work again.
    GpuStageTimer* stages = nullptr;

    float eps() const { return static_cast<float>(config->rms_norm_eps); }
    // With a trace: waits for the stream and copies `n` device floats into trace[prefix+name].
    void record(const char* name, const float* device_data, int64_t n) const;
    void record_host(const char* name, const float* host_data, int64_t n) const {
        if (trace != nullptr) trace->record(trace_prefix + name, host_data, n);
    }
};

// ---- linear algebra (device_linear.cu) ----
// y[t, :out] = x[t]·Wᵀ (+ b) for t < n_rows, rows contiguous.
void linear_apply(const DeviceLinear& linear, const float* x, int64_t n_rows, float* y,
                  cudaStream_t stream);
// The affine matmul for any row count with explicit strides: 1-4 rows per GEMV launch, more
// rows through the tiled GEMM.
void affine_matmul(const DeviceAffineMatrix& w, const float* x, size_t x_stride, int64_t n_rows,
                   float* y, size_t y_stride, cudaStream_t stream);

// ---- elementwise and norms (device_ops.cu) ----
// Blocks of 256 threads for a grid-stride loop over n elements.
int elementwise_blocks(int64_t n);
// y = x / rms · w per group of `group` values (group = n: one statistic per row); w spans n
// values, may be null; in place allowed. x, y: [n_rows, n].
void rms_norm_rows(const float* x, const float* w, int64_t n_rows, int64_t n, int64_t group,
                   float eps, float* y, cudaStream_t stream);
// rms_norm_rows, then y *= sigmoid(gate) (sigmoid_gate) or silu(gate); gate [n_rows, n] or null.
// One launch; the same operations in the same order as the norm and then the gate.
void gated_rms_norm_rows(const float* x, const float* w, const float* gate, bool sigmoid_gate,
                         int64_t n_rows, int64_t n, int64_t group, float eps, float* y,
                         cudaStream_t stream);
// x[t, s·H + d] += w[t, s] · y[t, d]
void hyper_connection_combine(float* x, const float* inject, const float* y, int64_t n_rows,
                              int64_t n_streams, int64_t hidden, cudaStream_t stream);

// ---- layers ----
void hyper_connection_mix(const DeviceHyperConnectionWeights& weights, const float* x,
                          int64_t n_rows, const DeviceContext& ctx, float* mix, float* inject);
// PLE (§3.4): `embedding` [T, P] holds the gathered, dequantized n-gram rows (host → device).
void ple_forward(const DevicePleWeights& weights, DevicePleState& state, const float* embedding,
                 float* x, int64_t n_rows, const DeviceContext& ctx);
void gated_deltanet_forward(const DeviceGatedDeltaNetWeights& weights,
                            DeviceGatedDeltaNetState& state, const float* mix, int64_t n_rows,
                            float* y, const DeviceContext& ctx);
// Appends the rows' keys at [first_position, +T) (cache.length must equal first_position, and
// *ctx.position must hold it on the device).
void sparse_attention_forward(const DeviceSparseAttentionWeights& weights,
                              DeviceAttentionCache& cache, const float* mix, int64_t n_rows,
                              int64_t first_position, float* y, const DeviceContext& ctx);
// What a QSA call's launches depend on besides device data: whether some row selects blocks, the
// block-score grid and the split count. A captured call replays correctly at another position
// with the same shape.
struct QsaLaunchShape {
    bool any_sparse = false;
    int64_t score_ctas = 0;
    int64_t n_splits = 1;
    auto operator<=>(const QsaLaunchShape&) const = default;
};
QsaLaunchShape qsa_launch_shape(const model_data::qwen4_exp::Config& c, bool has_indexer,
                                int64_t first_position, int64_t n_rows);
// The host half of a QSA call: the cache lengths after n_rows more rows. sparse_attention_forward
// does it; a replayed capture of the call does only this.
void sparse_attention_advance(DeviceAttentionCache& cache, int64_t n_rows, int64_t compress_ratio);
// x[t, s·H + d] += inject[t, s] · y[t, d] for s < n_streams: the hyper-connection update after a
// block, which an MoE call can apply as it writes y (hyper_connection_combine's arithmetic, in the
// combine kernel). x null: no update.
struct ResidualUpdate {
    float* x = nullptr;
    const float* inject = nullptr;
    int64_t n_streams = 0;
};
void moe_forward(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
                 int64_t n_rows, float* y, const DeviceContext& ctx);
// moe_forward in two halves: moe_route queues the router(s), top-k and the read-back of the
// routing into the pool's pinned staging, without synchronizing (so it can end a captured
// segment); moe_finish waits for the read-back and does the rest. Same arguments for both.
void moe_route(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
               int64_t n_rows, const DeviceContext& ctx);
void moe_finish(const DeviceMoeWeights& weights, const DeviceMoeWeights* next, const float* mix,
                int64_t n_rows, float* y, const DeviceContext& ctx,
                const ResidualUpdate& residual = {});
// The MoE block with no host round trip, for calls whose layer the device pool holds whole
// (every expert resident; DeviceExpertPool::layer_addresses): a decode call's routing becomes an
// address table on the device and the routed experts follow it; a prefill call's is grouped by
// expert on the device into the grouped GEMMs' token tiles. moe_on_device decides (outside
// stream capture: it may upload the layer's addresses) and returns the layer's addresses, or
// null when the call takes moe_forward; moe_forward_on_device queues the kernels (capturable),
// giving moe_forward's bits; after them, call ctx.expert_pool->release_layer(table_layer).
// No lookahead for the next layer (its misses, while the pool warms up, are read on demand).
const ExpertAddress* moe_on_device(const DeviceMoeWeights& weights, int64_t n_rows,
                                   const DeviceContext& ctx);
void moe_forward_on_device(const DeviceMoeWeights& weights, const ExpertAddress* addresses,
                           const float* mix, int64_t n_rows, float* y, const DeviceContext& ctx,
                           const ResidualUpdate& residual = {});

}  // namespace cherenkov::engine::cuda
