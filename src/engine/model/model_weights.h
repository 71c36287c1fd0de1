// The resident weights of a packed store (docs/store-format.md): dense.bin and ngram.bin mapped
// read-only, every tensor the forward pass needs resolved by name into typed views, grouped per
// layer. Routed experts are not here: they come through an ExpertSource. Loading checks every
// shape against the config, so a store that does not match its config fails here with the
// tensor's name, before any work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "engine/cpu/affine_matrix.h"
#include "engine/cpu/matmul.h"
#include "model_data/qwen4_exp/config.h"
#include "model_data/qwen4_exp/ngram_hashing.h"
#include "store/manifest/store_manifest.h"

namespace cherenkov::engine {

class ThreadPool;

// y = x·Wᵀ (+ b): an affine-quantized or float32 weight [out, in] and an optional bias.
struct Linear {
    bool quantized = true;
    AffineMatrix affine;
    F32Matrix dense;
    const float* bias = nullptr;  // [out] or null

    int64_t out_features() const { return quantized ? affine.rows : dense.rows; }
    int64_t in_features() const { return quantized ? affine.cols : dense.cols; }
    // y[t, :out] for t < n_rows; x and y rows are contiguous (stride = in / out features).
    // `activations`: how x meets quantized weights (engine/cpu/matmul.h).
    void apply(const float* x, int64_t n_rows, float* y, ThreadPool* pool,
               ActivationPrecision activations) const;
    // One row of W as floats (embedding lookup).
    void row(int64_t index, float* out) const;
};

// Hyper-connection mix/combine weights (docs/qwen4_exp.md §3.3); `inject` is absent for the final
// mixers.
struct HyperConnectionWeights {
    const float* norm = nullptr;   // [C·H], already 1+w
    Linear down;                   // [R, C·H]
    Linear up;                     // [C·H, R]
    std::optional<Linear> inject;  // [C, C·H]
};

struct GatedDeltaNetWeights {
    Linear in_qkv, in_z, in_b, in_a, out;
    const float* conv = nullptr;     // [conv_dim, Kc]
    const float* dt_bias = nullptr;  // [Hv]
    const float* a_log = nullptr;    // [Hv]
    const float* norm = nullptr;     // [dv], plain w
};

struct SparseAttentionWeights {
    Linear q, k, v, o;
    const float* q_norm = nullptr;  // [D], 1+w
    const float* k_norm = nullptr;
    bool has_indexer = false;
    Linear index_qk;                      // [(nI+1)·dI, H]
    const float* index_q_norm = nullptr;  // [dI], 1+w
    const float* index_k_norm = nullptr;
};

struct MoeWeights {
    Linear router;  // [E, H]
    Linear shared_gate, shared_up, shared_down;
    Linear shared_expert_gate;  // [1, H]
    int64_t table_layer = 0;    // the expert table's layer index (MTP layers follow the trunk)
};

// One PLE layer (docs/qwen4_exp.md §3.4): projections, norms, the dilated conv, and its n-gram
// table rows.
struct PleWeights {
    Linear key, value;  // [C·H, P], [H, P]
    const float* norm_key = nullptr;
    const float* norm_query = nullptr;
    const float* norm_conv = nullptr;
    const float* conv = nullptr;  // [C·H, Kp]
    model_data::qwen4_exp::NgramHash hash;
    const uint8_t* table = nullptr;  // rows of [codes | BF16 scales | BF16 biases]
    uint64_t table_rows = 0;
    uint64_t row_bytes = 0;
    int64_t width = 0;  // dh
    int group_size = 32;
    int bits = 4;

    // Dequantizes table row `row` into out[0, width).
    void gather_row(int64_t row, float* out) const;
};

struct LayerWeights {
    model_data::qwen4_exp::LayerType type = model_data::qwen4_exp::LayerType::LinearAttention;
    HyperConnectionWeights attn_hc, mlp_hc;
    std::optional<GatedDeltaNetWeights> gdn;
    std::optional<SparseAttentionWeights> qsa;
    MoeWeights moe;
    std::optional<PleWeights> ple;
};

struct MtpWeights {
    const float* pre_fc_norm_embedding = nullptr;  // [H], 1+w
    const float* pre_fc_norm_hidden = nullptr;     // [C·H], 1+w, one statistic over C·H
    Linear fc_embedding, fc_hidden;                // [H, H]
    std::vector<LayerWeights> layers;
    HyperConnectionWeights mixer;
    Linear embed, lm_head;  // the trunk's unless mtp_use_dedicated_embeddings
};

struct ModelWeights {
    std::string store_dir;
    model_data::qwen4_exp::Config config;
    store::StoreManifest manifest;
    std::shared_ptr<const MappedFile> dense_file;
    std::shared_ptr<const MappedFile> ngram_file;

    Linear embed;    // [V, H]
    Linear lm_head;  // [V, H]
    HyperConnectionWeights final_mixer;
    std::vector<LayerWeights> layers;
    std::optional<MtpWeights> mtp;  // absent without MTP weights, or when not loaded
    // The byte ranges of dense.bin the views above point into, sorted and merged: what the
    // model reads, and what a device copy holds. Pages of dense.bin outside them (an MTP head
    // that was not loaded) are never touched.
    std::vector<store::ByteRange> resident_ranges;

    uint64_t resident_bytes() const;  // Σ resident_ranges
};

struct WeightLoadOptions {
    // false: the MTP draft head is not resolved (mtp stays empty, its bytes are not resident),
    // for generation without drafts (--drafts 0).
    bool mtp = true;
};

// Maps and resolves a store directory (manifest.json, config.json, dense.bin, ngram.bin).
// Throws NotFound / Corrupt naming the file and tensor for missing files, missing tensors and
// shapes that disagree with the config.
std::unique_ptr<ModelWeights> load_model_weights(const std::string& store_dir,
                                                 const WeightLoadOptions& options = {});
// The same from the store's manifest.json and config.json parsed already (store::check_store).
std::unique_ptr<ModelWeights> load_model_weights(const std::string& store_dir,
                                                 store::StoreManifest manifest,
                                                 model_data::qwen4_exp::Config config,
                                                 const WeightLoadOptions& options = {});

}  // namespace cherenkov::engine
