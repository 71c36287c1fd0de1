// Role → expected shape table of docs/qwen4_exp.md §2.2–2.7 and §6.2, and the packed-shape
// rule of docs/formats.md §2.2.
#include "model_data/qwen4_exp/tensor_shapes.h"

#include <array>

namespace cherenkov::model_data::qwen4_exp {

namespace {

using R = TensorRole;
using Shape = std::vector<int64_t>;
using Shapes = std::vector<Shape>;

// Global, hyper-connection and MoE roles (§2.2, §2.3, §2.6, §6.2).
std::optional<Shapes> common_shapes(const Config& c, TensorRole role) {
    const int64_t h = c.hidden_size;
    const int64_t ch = c.hc_width();
    const int64_t r = c.hc_lowrank;
    const int64_t v = c.vocab_size;
    const int64_t e = c.num_experts;
    const int64_t i = c.moe_intermediate_size;
    const int64_t is = c.shared_expert_intermediate_size;
    switch (role) {
        case R::EmbedTokens:
        case R::LmHead:
        case R::MtpEmbedTokens:
        case R::MtpLmHead: return Shapes{{v, h}};
        case R::FinalHcNorm:
        case R::AttnHcNorm:
        case R::MlpHcNorm:
        case R::MtpHcNorm:
        case R::MtpPreFcNormHidden: return Shapes{{ch}};
        case R::FinalMixDown:
        case R::AttnHcMixDown:
        case R::MlpHcMixDown:
        case R::MtpMixDown: return Shapes{{r, ch}};
        case R::FinalMixUp:
        case R::AttnHcMixUp:
        case R::MlpHcMixUp:
        case R::MtpMixUp: return Shapes{{ch, r}};
        case R::AttnHcBlockInject:
        case R::MlpHcBlockInject: return Shapes{{c.hc_count, ch}};
        case R::MtpPreFcNormEmbedding: return Shapes{{h}};
        case R::MtpFcEmbedding:
        case R::MtpFcHidden: return Shapes{{h, h}};
        case R::Router: return Shapes{{e, h}};
        case R::ExpertsGateUp: return Shapes{{e, 2 * i, h}};
        case R::ExpertsDown:
        case R::SwitchDown: return Shapes{{e, h, i}};
        case R::ExpertGate:
        case R::ExpertUp: return Shapes{{i, h}};
        case R::ExpertDown: return Shapes{{h, i}};
        case R::SwitchGate:
        case R::SwitchUp: return Shapes{{e, i, h}};
        case R::SharedExpertGateProj:
        case R::SharedExpertUpProj: return Shapes{{is, h}};
        case R::SharedExpertDownProj: return Shapes{{h, is}};
        case R::SharedExpertGate: return Shapes{{1, h}};
        default: return std::nullopt;
    }
}

// GDN and QSA roles (§2.4, §2.5).
std::optional<Shapes> mixer_shapes(const Config& c, TensorRole role) {
    const int64_t h = c.hidden_size;
    const int64_t hv = c.linear_num_value_heads;
    const int64_t d = c.head_dim;
    const int64_t k = c.linear_conv_kernel_dim;
    switch (role) {
        case R::GdnInProjQkv: return Shapes{{c.conv_dim, h}};
        case R::GdnInProjZ: return Shapes{{c.value_dim, h}};
        case R::GdnInProjB:
        case R::GdnInProjA: return Shapes{{hv, h}};
        case R::GdnConv1d: return Shapes{{c.conv_dim, 1, k}, {c.conv_dim, k, 1}};
        case R::GdnDtBias:
        case R::GdnALog: return Shapes{{hv}};
        case R::GdnNorm: return Shapes{{c.linear_value_head_dim}};
        case R::GdnOutProj: return Shapes{{h, c.value_dim}};
        case R::QsaQProj: return Shapes{{c.num_attention_heads * 2 * d, h}};
        case R::QsaKProj:
        case R::QsaVProj: return Shapes{{c.num_key_value_heads * d, h}};
        case R::QsaOProj: return Shapes{{h, c.num_attention_heads * d}};
        case R::QsaQNorm:
        case R::QsaKNorm: return Shapes{{d}};
        case R::IndexerQkProj:
            if (!c.indexer) return Shapes{};
            return Shapes{{(c.indexer->n_heads + 1) * c.indexer->head_dim, h}};
        case R::IndexerQNorm:
        case R::IndexerKNorm:
            if (!c.indexer) return Shapes{};
            return Shapes{{c.indexer->head_dim}};
        default: return std::nullopt;
    }
}

// PLE roles (§2.7). Table rows are checked against the shard plan, not here.
Shapes ple_shapes(const Config& c, TensorRole role) {
    if (!c.has_ple()) return {};
    const int64_t ch = c.hc_width();
    const int64_t p = c.ple_embed_dim;
    switch (role) {
        case R::PleKeyProj: return {{ch, p}};
        case R::PleValueProj: return {{c.hidden_size, p}};
        case R::PleNormKey:
        case R::PleNormQuery:
        case R::PleNormConv: return {{ch}};
        case R::PleConv1d:
            return {{ch, 1, c.ple_conv_kernel_size}, {ch, c.ple_conv_kernel_size, 1}};
        case R::NgramShard:
        case R::NgramTable: return {{kAnySize, c.ngram_head_dim}};
        case R::PleLayerMultipliers: return {{c.ngram_size}};
        case R::PleHeadVocabSizes:
        case R::PleHeadOffsets: return {{c.n_ngram_heads}};
        case R::PleWeightScale: return {{}, {1}};
        default: return {};
    }
}

bool matches(const Shape& expected, const std::vector<int64_t>& actual) {
    if (expected.size() != actual.size()) return false;
    for (size_t axis = 0; axis < expected.size(); ++axis) {
        if (expected[axis] != kAnySize && expected[axis] != actual[axis]) return false;
    }
    return true;
}

std::string format_alternatives(const Shapes& shapes) {
    std::string text;
    for (const Shape& shape : shapes) {
        if (!text.empty()) text += " or ";
        text += format_shape(shape);
    }
    return text;
}

// Leading dims [..., out] of a packed weight or its scales / biases.
bool leading_dims_match(const Shape& logical, const std::vector<int64_t>& actual) {
    if (logical.size() != actual.size() || logical.empty()) return false;
    for (size_t axis = 0; axis + 1 < logical.size(); ++axis) {
        if (logical[axis] != kAnySize && logical[axis] != actual[axis]) return false;
    }
    return true;
}

ShapeVerdict check_packed(const Shape& logical, const std::vector<int64_t>& actual,
                          TensorComponent component, std::optional<int> bits) {
    ShapeVerdict verdict;
    const int64_t in = logical.back();
    const std::string what =
        component == TensorComponent::Weight ? "packed weight" : "scales/biases";
    if (!leading_dims_match(logical, actual)) {
        verdict.ok = false;
        verdict.message = what + " shape " + format_shape(actual) + " does not fit logical " +
                          format_shape(logical);
        return verdict;
    }
    const int64_t stored = actual.back();
    if (component != TensorComponent::Weight) {
        // One value per group: in / stored must be a whole group size.
        if (stored <= 0 || in % stored != 0) {
            verdict.ok = false;
            verdict.message = "scales/biases width " + std::to_string(stored) +
                              " does not divide the input width " + std::to_string(in);
        }
        return verdict;
    }
    if (!bits) {
        verdict.packed_width_unchecked = true;
        return verdict;
    }
    if (*bits < 1 || *bits > 32 || (in * *bits) % 32 != 0 || stored != in * *bits / 32) {
        verdict.ok = false;
        verdict.message = "packed width " + std::to_string(stored) + " is not " +
                          std::to_string(in) + " x " + std::to_string(*bits) + " bits / 32";
    }
    return verdict;
}

}  // namespace

std::string format_shape(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t axis = 0; axis < shape.size(); ++axis) {
        if (axis > 0) text += ", ";
        text += shape[axis] == kAnySize ? "*" : std::to_string(shape[axis]);
    }
    return text + "]";
}

bool is_float_dtype(const std::string& dtype) {
    static constexpr std::array<std::string_view, 8> kFloats = {
        "F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
    for (std::string_view name : kFloats) {
        if (dtype == name) return true;
    }
    return false;
}

std::vector<std::vector<int64_t>> expected_shapes(const Config& config, TensorRole role) {
    if (auto shapes = common_shapes(config, role)) return *shapes;
    if (auto shapes = mixer_shapes(config, role)) return *shapes;
    return ple_shapes(config, role);
}

ShapeVerdict check_shape(const Config& config, const TensorName& name, const std::string& dtype,
                         const std::vector<int64_t>& shape, std::optional<int> bits) {
    const Shapes alternatives = expected_shapes(config, name.address.role);
    if (alternatives.empty()) return {};
    const Shape& logical = alternatives.front();
    ShapeVerdict verdict;
    switch (name.component) {
        case TensorComponent::Bias: {
            const Shape bias_shape = {logical.front()};
            if (!matches(bias_shape, shape)) {
                verdict.ok = false;
                verdict.message =
                    "bias shape " + format_shape(shape) + ", expected " + format_shape(bias_shape);
            }
            return verdict;
        }
        case TensorComponent::Scales:
        case TensorComponent::Biases:
            return check_packed(logical, shape, name.component, std::nullopt);
        case TensorComponent::Weight: break;
    }
    if (dtype == "U32" && is_quantizable_role(name.address.role)) {
        return check_packed(logical, shape, name.component, bits);
    }
    for (const Shape& expected : alternatives) {
        if (matches(expected, shape)) return verdict;
    }
    verdict.ok = false;
    verdict.message =
        "shape " + format_shape(shape) + ", expected " + format_alternatives(alternatives);
    return verdict;
}

std::string check_dtype(const TensorName& name, const std::string& dtype) {
    const TensorRole role = name.address.role;
    const bool buffer =
        role == R::PleLayerMultipliers || role == R::PleHeadVocabSizes || role == R::PleHeadOffsets;
    switch (name.component) {
        case TensorComponent::Weight:
            if (buffer) return dtype == "I64" ? "" : "dtype " + dtype + ", expected I64";
            if (is_float_dtype(dtype)) return "";
            if (dtype == "U32" && is_quantizable_role(role)) return "";
            return "dtype " + dtype + " cannot hold a " + std::string(tensor_role_name(role)) +
                   " weight";
        case TensorComponent::Scales:
            // mxfp4 / mxfp8 / nvfp4 store scales as U8 (docs/formats.md §2.1).
            if (is_float_dtype(dtype) || dtype == "U8" || dtype == "F8_E8M0") return "";
            return "scales dtype " + dtype + " is not a float or U8";
        case TensorComponent::Biases:
        case TensorComponent::Bias:
            if (is_float_dtype(dtype)) return "";
            return std::string(tensor_component_name(name.component)) + " dtype " + dtype +
                   " is not a float";
    }
    return "";
}

}  // namespace cherenkov::model_data::qwen4_exp
