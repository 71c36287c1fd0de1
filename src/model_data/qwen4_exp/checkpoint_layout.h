// What a qwen4_exp checkpoint holds, checked against its Config (docs/qwen4_exp.md §2, §6.2;
// docs/formats.md §3.5–3.9): every tensor's role and shape, the expert form, the MTP head, the PLE
// n-gram shards with their row offsets, missing / unknown tensors, and the layout signals that
// tell zero-centred (HF) norm weights from folded (MLX-converted) ones.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_data/qwen4_exp/config.h"
#include "model_data/qwen4_exp/tensor_roles.h"

namespace cherenkov::model_data::qwen4_exp {

// One tensor as a container reader reports it: safetensors dtype string ("BF16", "U32", "I64"...)
// and row-major shape.
struct TensorEntry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
};

enum class ShapeCheck {
    Ok,
    Mismatch,
    Unchecked,  // MLX-packed U32 weight whose bits are unknown: only leading dims checked
};

enum class ExpertForm {
    None,        // no routed-expert tensors found
    Fused,       // experts.gate_up_proj [E, 2I, H] + experts.down_proj [E, H, I]
    PerExpert,   // experts.{e}.{gate,up,down}_proj
    MlxStacked,  // switch_mlp.{gate,up,down}_proj [E, ...]
    Mixed,       // layers differ
};

// Depthwise conv1d storage (GDN and PLE).
enum class ConvLayout {
    Unknown,
    Hf,   // [C, 1, K] (PyTorch)
    Mlx,  // [C, K, 1]
    Mixed,
};

// Whether the `1 + w` norm weights (hc_norm, q/k norms, indexer and PLE norms) are stored
// zero-centred or with the 1 folded in (docs/formats.md §3.8–3.9).
enum class NormConvention {
    ZeroCentred,   // HF layout signals only
    Folded,        // mlx-vlm conversion (MLX layout + concatenated n-gram table): folds the +1
    Undetermined,  // other MLX layouts: producers disagree (mlx-lm qwen4_exp keeps zero-centred,
                   // but this is unconfirmed); decide by the weights' mean (near 0 vs near 1)
};

std::string_view shape_check_name(ShapeCheck check);
std::string_view expert_form_name(ExpertForm form);
std::string_view conv_layout_name(ConvLayout layout);
std::string_view norm_convention_name(NormConvention convention);

struct LayoutTensor {
    TensorEntry entry;
    TensorName name;
    ShapeCheck shape_check = ShapeCheck::Ok;
};

struct NgramShardInfo {
    int64_t shard = 0;
    std::string name;
    int64_t row_offset = 0;  // first global row of the table held by this shard
    int64_t rows = 0;
};

struct PleLayerLayout {
    int64_t layer = 0;                   // 0-based trunk layer
    int64_t ple_layer_index = 0;         // rank in ple_layer_ids
    bool concatenated = false;           // one `ngram_embedding.weight` table instead of shards
    std::vector<NgramShardInfo> shards;  // numeric shard order (or the one table)
    int64_t rows = 0;                    // Σ rows
    int64_t expected_rows = 0;           // padded_rows of §3.4
    bool has_layer_multipliers = false;
    bool has_head_vocab_sizes = false;
    bool has_head_offsets = false;
    bool has_weight_scale = false;
};

struct MtpLayout {
    int64_t declared_layers = 0;  // mtp_num_hidden_layers
    bool present = false;         // any MTP tensor found
    NamePrefix prefix = NamePrefix::None;
    std::vector<int64_t> layers;  // MTP layer indices found, ascending
    ExpertForm expert_form = ExpertForm::None;
    bool dedicated_embeddings = false;  // mtp.embed_tokens / mtp.shared_head.head found
};

enum class ProblemKind {
    Shape,         // shape differs from the config
    Dtype,         // dtype cannot hold this role
    Unexpected,    // known name that this config does not use (wrong layer type, index range)
    Shards,        // n-gram shards do not form the table
    Inconsistent,  // mixed prefixes, duplicates, companions without their weight
};

std::string_view problem_kind_name(ProblemKind kind);

struct LayoutProblem {
    ProblemKind kind = ProblemKind::Shape;
    std::string tensor;  // the tensor (or module) concerned
    std::string message;
};

struct CheckpointLayout {
    NamePrefix trunk_prefix = NamePrefix::None;  // form of the trunk names
    NamePrefix head_prefix = NamePrefix::None;   // lm_head form, None when absent
    ExpertForm expert_form = ExpertForm::None;   // trunk layers
    ConvLayout conv_layout = ConvLayout::Unknown;
    NormConvention norm_convention = NormConvention::Undetermined;
    std::vector<std::string> layout_signals;  // what decided the two properties above
    bool quantized = false;                   // MLX-packed weights present
    bool lm_head_tied = false;                // no lm_head; the head is embed_tokens
    std::vector<LayoutTensor> tensors;        // input order
    std::vector<PleLayerLayout> ple_layers;   // ascending layer
    MtpLayout mtp;
    std::vector<std::string> missing;    // required names absent, in the detected prefix form
    std::vector<std::string> unknown;    // unrecognized names (warned)
    std::vector<std::string> ignored;    // known and unused (§2.1)
    std::vector<std::string> unchecked;  // packed weights whose logical width was not checked
    std::vector<LayoutProblem> problems;
    std::vector<std::string> notes;  // non-fatal observations

    bool ok() const { return missing.empty() && problems.empty(); }
};

struct LayoutOptions {
    // Bits of an MLX-quantized module (the name without `.weight`), when the caller knows them
    // (QuantizationConfig::params_for). Without it, packed widths are reported unchecked.
    std::function<std::optional<int>(std::string_view module)> bits_of;
};

// Classifies and checks every tensor. Never throws for a bad checkpoint: everything wrong lands
// in missing / unknown / problems. Unknown names are logged as warnings.
CheckpointLayout describe_layout(const Config& config, const std::vector<TensorEntry>& tensors,
                                 const LayoutOptions& options = {});

// Throws Corrupt naming `source` and the first problems when !layout.ok().
void require_loadable(const CheckpointLayout& layout, const std::string& source);

// For `inspect --json`: properties, PLE shards, MTP, missing / unknown / problems, role counts.
nlohmann::json layout_to_json(const CheckpointLayout& layout);

}  // namespace cherenkov::model_data::qwen4_exp
