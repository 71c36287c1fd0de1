// The resident weights of a store in device memory (issue 9, "Dense weights uploaded once"):
// the parts of dense.bin the model uses (ModelWeights::resident_ranges; an MTP head that was not
// loaded is not among them) are copied to the GPU into one allocation, each keeping its offset
// modulo 4096, and every tensor view of ModelWeights is translated into it, so the device
// structs below mirror engine/model's ModelWeights one to one. The n-gram table stays on the host
// (rows are gathered on the CPU and copied per call). Plain C++: no CUDA types, so tests and host
// code can include it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/cuda/affine_gemv.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/model_weights.h"

namespace cherenkov::engine::cuda {

// y = x·Wᵀ (+ b) with W affine-quantized or float32 [out, in], all pointers in device memory.
struct DeviceLinear {
    bool quantized = true;
    DeviceAffineMatrix affine;     // when quantized
    const float* dense = nullptr;  // [rows, cols] float32 when not quantized
    int64_t rows = 0;              // out features
    int64_t cols = 0;              // in features
    const float* bias = nullptr;   // [rows] or null

    int64_t out_features() const { return rows; }
    int64_t in_features() const { return cols; }
};

struct DeviceHyperConnectionWeights {
    const float* norm = nullptr;  // [C·H], 1+w folded
    DeviceLinear down;            // [R, C·H]
    DeviceLinear up;              // [C·H, R]
    bool has_inject = false;
    DeviceLinear inject;  // [C, C·H]
};

struct DeviceGatedDeltaNetWeights {
    DeviceLinear in_qkv, in_z, in_b, in_a, out;
    const float* conv = nullptr;     // [conv_dim, Kc]
    const float* dt_bias = nullptr;  // [Hv]
    const float* a_log = nullptr;    // [Hv]
    const float* norm = nullptr;     // [dv], plain w
};

struct DeviceSparseAttentionWeights {
    DeviceLinear q, k, v, o;
    const float* q_norm = nullptr;  // [D], 1+w folded
    const float* k_norm = nullptr;
    bool has_indexer = false;
    DeviceLinear index_qk;                // [(nI+1)·dI, H]
    const float* index_q_norm = nullptr;  // [dI]
    const float* index_k_norm = nullptr;
};

struct DeviceMoeWeights {
    DeviceLinear router;  // [E, H]
    DeviceLinear shared_gate, shared_up, shared_down;
    DeviceLinear shared_expert_gate;  // [1, H]
    int64_t table_layer = 0;
    // The shared expert as one entry of an expert address table (device [1]) when its three
    // matrices are affine at one precision the expert kernels take, without bias; else null.
    // Decode then runs it through the routed experts' kernels (affine_experts_swiglu_parts: two
    // launches instead of four), and a layer routed on the device inside the routed launches.
    const ExpertAddress* shared_expert = nullptr;
    ExpertShape shared_shape;
};

// The PLE projections and conv; the n-gram rows come from the host table (PleWeights).
struct DevicePleWeights {
    DeviceLinear key, value;  // [C·H, P], [H, P]
    const float* norm_key = nullptr;
    const float* norm_query = nullptr;
    const float* norm_conv = nullptr;
    const float* conv = nullptr;  // [C·H, Kp]
};

struct DeviceLayerWeights {
    DeviceHyperConnectionWeights attn_hc, mlp_hc;
    std::optional<DeviceGatedDeltaNetWeights> gdn;
    std::optional<DeviceSparseAttentionWeights> qsa;
    DeviceMoeWeights moe;
    std::optional<DevicePleWeights> ple;
};

struct DeviceMtpWeights {
    const float* pre_fc_norm_embedding = nullptr;
    const float* pre_fc_norm_hidden = nullptr;
    DeviceLinear fc_embedding, fc_hidden;
    std::vector<DeviceLayerWeights> layers;
    DeviceHyperConnectionWeights mixer;
    DeviceLinear embed, lm_head;
};

struct DeviceModelWeights {
    DeviceBuffer dense;  // a copy of dense.bin
    DeviceLinear embed, lm_head;
    DeviceHyperConnectionWeights final_mixer;
    std::vector<DeviceLayerWeights> layers;
    std::optional<DeviceMtpWeights> mtp;
    DeviceBuffer shared_experts;  // the layers' DeviceMoeWeights::shared_expert entries

    uint64_t bytes() const { return dense.size(); }  // the device copy of dense.bin's used parts
};

// Copies the used parts of dense.bin to the device and translates every view. Throws Internal when
// a view of `weights` does not point into dense.bin (nothing else is uploaded), and the runtime's
// error (out of memory) naming the size asked for.
std::unique_ptr<DeviceModelWeights> upload_model_weights(const ModelWeights& weights);

// The device view of one host Linear whose tensors lie in `host_base`'s mapping of `n_bytes`,
// uploaded at `device_base`. Exposed for tests that upload their own buffers.
DeviceLinear translate_linear(const Linear& linear, const void* host_base, uint64_t n_bytes,
                              const void* device_base);

}  // namespace cherenkov::engine::cuda
