// qwen4_exp tensor names → roles (docs/qwen4_exp.md §2, §6.2; docs/formats.md §3.5–3.9). Purely
// syntactic: which prefix form, which layer / expert / shard, which role, which component
// (MLX `.scales` / `.biases` companions). Checking names against a Config is checkpoint_layout's
// job.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace cherenkov::model_data::qwen4_exp {

// How a name starts.
enum class NamePrefix {
    None,                 // ignored or unknown names
    ModelLanguageModel,   // "model.language_model."  HF Qwen4ExpForConditionalGeneration
    Model,                // "model."                 HF Qwen4ExpForCausalLM, mlx-lm qwen4_exp
    LanguageModelModel,   // "language_model.model."  mlx-lm / mlx-vlm qwen3_5-style conversions
    LmHead,               // "lm_head.weight"
    LanguageModelLmHead,  // "language_model.lm_head.weight"
    Mtp,                  // "mtp."
    ModelMtp,             // "model.mtp."
    LanguageModelMtp,     // "language_model.mtp."
};

// Groups stay contiguous and in this order: checkpoint_layout iterates the ranges
// AttnHcNorm..MlpHcBlockInject, GdnInProjQkv..GdnOutProj, QsaQProj..IndexerKNorm,
// PleKeyProj..PleWeightScale and MtpPreFcNormEmbedding..MtpMixUp.
enum class TensorRole {
    // Globals (§2.2).
    EmbedTokens,
    LmHead,
    FinalHcNorm,
    FinalMixDown,
    FinalMixUp,
    // Hyper-connections, every layer (§2.3).
    AttnHcNorm,
    AttnHcMixDown,
    AttnHcMixUp,
    AttnHcBlockInject,
    MlpHcNorm,
    MlpHcMixDown,
    MlpHcMixUp,
    MlpHcBlockInject,
    // Gated DeltaNet (§2.4).
    GdnInProjQkv,
    GdnInProjZ,
    GdnInProjB,
    GdnInProjA,
    GdnConv1d,
    GdnDtBias,
    GdnALog,
    GdnNorm,
    GdnOutProj,
    // QSA attention (§2.5); biases are the Bias component of the projections.
    QsaQProj,
    QsaKProj,
    QsaVProj,
    QsaOProj,
    QsaQNorm,
    QsaKNorm,
    IndexerQkProj,
    IndexerQNorm,
    IndexerKNorm,
    // MoE (§2.6, docs/formats.md §3.5).
    Router,
    ExpertsGateUp,  // fused [E, 2I, H], no .weight suffix
    ExpertsDown,    // fused [E, H, I]
    ExpertGate,     // per-expert, with expert id
    ExpertUp,
    ExpertDown,
    SwitchGate,  // MLX stacked [E, I, H]
    SwitchUp,
    SwitchDown,
    SharedExpertGateProj,
    SharedExpertUpProj,
    SharedExpertDownProj,
    SharedExpertGate,  // [1, H] scalar gate
    // PLE (§2.7).
    PleKeyProj,
    PleValueProj,
    PleNormKey,
    PleNormQuery,
    PleNormConv,
    PleConv1d,
    NgramShard,  // with shard index
    NgramTable,  // one concatenated table (mlx-vlm conversion, docs/formats.md §3.9)
    PleLayerMultipliers,
    PleHeadVocabSizes,
    PleHeadOffsets,
    PleWeightScale,
    // MTP globals (§6.2); MTP layers use the layer roles above.
    MtpPreFcNormEmbedding,
    MtpPreFcNormHidden,
    MtpFcEmbedding,
    MtpFcHidden,
    MtpHcNorm,
    MtpMixDown,
    MtpMixUp,
    MtpEmbedTokens,  // mtp.embed_tokens (dedicated embeddings only)
    MtpLmHead,       // mtp.shared_head.head (dedicated embeddings only)
    // Known and deliberately unused (visual, inv_freq, hashstats, token_lookup, mixer inject).
    Ignored,
    Unknown,
};

// Which stored tensor of a parameter the name is.
enum class TensorComponent {
    Weight,  // `.weight`, or the bare parameter (A_log, dt_bias, experts.gate_up_proj, buffers)
    Scales,  // MLX affine / mx scales
    Biases,  // MLX affine biases
    Bias,    // a Linear bias (`.bias`)
};

// What a name denotes, independent of its spelling.
struct TensorAddress {
    TensorRole role = TensorRole::Unknown;
    bool mtp = false;     // an MTP global or MTP layer tensor
    int64_t layer = -1;   // trunk layer, or MTP layer when mtp; -1 for globals
    int64_t expert = -1;  // per-expert roles
    int64_t shard = -1;   // NgramShard

    auto operator<=>(const TensorAddress&) const = default;
};

struct TensorName {
    TensorAddress address;
    NamePrefix prefix = NamePrefix::None;
    TensorComponent component = TensorComponent::Weight;
    std::string module;  // the name without its component suffix (MLX quantization key)
    std::string note;    // why an Ignored name is ignored
};

std::string_view name_prefix_text(NamePrefix prefix);               // "model.language_model." ...
std::string_view tensor_role_name(TensorRole role);                 // "attn_hc_norm" ...
std::string_view tensor_component_name(TensorComponent component);  // "weight" ...

// True for roles that belong to a decoder layer (trunk or MTP).
bool is_layer_role(TensorRole role);
// Linear / embedding roles that MLX may store packed (U32 + scales [+ biases]).
bool is_quantizable_role(TensorRole role);

// Classifies one name. Never throws; unrecognized names get TensorRole::Unknown.
TensorName classify_tensor(std::string_view name);

// The name of `address` (component Weight) in a prefix form: `prefix` is the trunk form
// (ModelLanguageModel, Model or LanguageModelModel) for trunk tensors and lm_head, the MTP form
// (Mtp, ModelMtp, LanguageModelMtp) for MTP tensors. The inverse of classify_tensor.
std::string tensor_name_of(const TensorAddress& address, NamePrefix prefix);

}  // namespace cherenkov::model_data::qwen4_exp
