// describe_layout: classifies every tensor of a qwen4_exp checkpoint, checks it against the
// Config, and lists what is missing (docs/qwen4_exp.md §2, §6.2; docs/formats.md §3.5–3.9).
#include "model_data/qwen4_exp/checkpoint_layout.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "model_data/qwen4_exp/ngram_hashing.h"
#include "model_data/qwen4_exp/tensor_shapes.h"

namespace cherenkov::model_data::qwen4_exp {

namespace {

using R = TensorRole;

constexpr size_t kMaxLoggedUnknown = 20;

bool is_gdn_role(TensorRole role) {
    return role >= R::GdnInProjQkv && role <= R::GdnOutProj;
}
bool is_qsa_role(TensorRole role) {
    return role >= R::QsaQProj && role <= R::IndexerKNorm;
}
bool is_indexer_role(TensorRole role) {
    return role >= R::IndexerQkProj && role <= R::IndexerKNorm;
}
bool is_ple_role(TensorRole role) {
    return role >= R::PleKeyProj && role <= R::PleWeightScale;
}
bool is_conv_role(TensorRole role) {
    return role == R::GdnConv1d || role == R::PleConv1d;
}

// Which stored components exist at one address (indices into layout.tensors, -1 = absent).
struct Seen {
    int64_t weight = -1;
    int64_t scales = -1;
    int64_t biases = -1;
    int64_t bias = -1;

    int64_t& slot(TensorComponent component) {
        switch (component) {
            case TensorComponent::Weight: return weight;
            case TensorComponent::Scales: return scales;
            case TensorComponent::Biases: return biases;
            case TensorComponent::Bias: return bias;
        }
        return weight;
    }
};

// Bits of the expert forms seen in one layer.
constexpr unsigned kFused = 1;
constexpr unsigned kPerExpert = 2;
constexpr unsigned kStacked = 4;

unsigned expert_form_bit(TensorRole role) {
    switch (role) {
        case R::ExpertsGateUp:
        case R::ExpertsDown: return kFused;
        case R::ExpertGate:
        case R::ExpertUp:
        case R::ExpertDown: return kPerExpert;
        case R::SwitchGate:
        case R::SwitchUp:
        case R::SwitchDown: return kStacked;
        default: return 0;
    }
}

ExpertForm form_of_bits(unsigned bits) {
    switch (bits) {
        case 0: return ExpertForm::None;
        case kFused: return ExpertForm::Fused;
        case kPerExpert: return ExpertForm::PerExpert;
        case kStacked: return ExpertForm::MlxStacked;
        default: return ExpertForm::Mixed;
    }
}

ExpertForm combine_forms(ExpertForm a, ExpertForm b) {
    if (a == ExpertForm::None) return b;
    if (b == ExpertForm::None || a == b) return a;
    return ExpertForm::Mixed;
}

class LayoutBuilder {
public:
    LayoutBuilder(const Config& config, const LayoutOptions& options, CheckpointLayout& layout)
        : config_(config), options_(options), layout_(layout) {}

    void add(const TensorEntry& entry);
    void finish();

private:
    void problem(ProblemKind kind, const std::string& tensor, const std::string& message) {
        layout_.problems.push_back({kind, tensor, message});
    }
    std::string address_problem(const TensorName& name) const;
    void check_tensor(int64_t index);
    void note_conv_layout(const std::vector<int64_t>& shape);
    void check_companions();
    void settle_prefixes();
    bool has_weight(const TensorAddress& address) const;
    void require(const TensorAddress& address, NamePrefix prefix);
    void require_layer(int64_t layer, bool mtp, NamePrefix prefix);
    ExpertForm require_experts(int64_t layer, bool mtp, NamePrefix prefix);
    void require_globals();
    void require_mtp();
    void describe_ple_layer(int64_t layer, int64_t ple_index);
    void decide_norm_convention();

    const Config& config_;
    const LayoutOptions& options_;
    CheckpointLayout& layout_;
    std::map<TensorAddress, Seen> seen_;
    std::map<std::pair<bool, int64_t>, unsigned> expert_bits_;  // (mtp, layer) → forms
    std::map<NamePrefix, int64_t> trunk_prefixes_;
    std::map<NamePrefix, int64_t> mtp_prefixes_;
    std::set<int64_t> mtp_layers_;
    int64_t n_mtp_tensors_ = 0;
    std::vector<int64_t> padded_rows_;  // per ple_layer_index (§3.4)
    bool conv_hf_ = false;
    bool conv_mlx_ = false;
};

bool LayoutBuilder::has_weight(const TensorAddress& address) const {
    const auto it = seen_.find(address);
    return it != seen_.end() && it->second.weight >= 0;
}

// Why a known name does not belong to this config, or "".
std::string LayoutBuilder::address_problem(const TensorName& name) const {
    const TensorAddress& address = name.address;
    if (!is_layer_role(address.role)) return "";
    const std::string where =
        (address.mtp ? "MTP layer " : "layer ") + std::to_string(address.layer);
    if (address.mtp && address.layer >= config_.mtp_num_hidden_layers) {
        return where + " is beyond mtp_num_hidden_layers " +
               std::to_string(config_.mtp_num_hidden_layers);
    }
    if (!address.mtp && address.layer >= config_.num_hidden_layers) {
        return where + " is beyond num_hidden_layers " + std::to_string(config_.num_hidden_layers);
    }
    const LayerType type = address.mtp ? LayerType::QwenSparseAttention
                                       : config_.layer_types[static_cast<size_t>(address.layer)];
    if (is_gdn_role(address.role) && type != LayerType::LinearAttention) {
        return "linear_attn tensor on " + where + ", a qwen_sparse_attention layer";
    }
    if (is_qsa_role(address.role) && type != LayerType::QwenSparseAttention) {
        return "self_attn tensor on " + where + ", a linear_attention layer";
    }
    if (is_indexer_role(address.role) && !config_.has_indexer()) {
        return "QSA indexer tensor, but the config has no indexer_* fields";
    }
    if (name.component == TensorComponent::Bias && !config_.attention_bias) {
        return "attention bias, but attention_bias is false";
    }
    if (is_ple_role(address.role)) {
        if (address.mtp) return "PLE tensor in " + where + " (MTP layers have no PLE)";
        if (!config_.ple_layer_index[static_cast<size_t>(address.layer)]) {
            return "PLE tensor on " + where + ", whose id " + std::to_string(address.layer + 1) +
                   " is not in ple_layer_ids";
        }
    }
    if (address.expert >= config_.num_experts) {
        return "expert " + std::to_string(address.expert) + " is beyond num_experts " +
               std::to_string(config_.num_experts);
    }
    return "";
}

void LayoutBuilder::note_conv_layout(const std::vector<int64_t>& shape) {
    if (shape.size() != 3) return;
    if (shape[1] == 1 && shape[2] != 1) conv_hf_ = true;
    if (shape[2] == 1 && shape[1] != 1) conv_mlx_ = true;
}

void LayoutBuilder::check_tensor(int64_t index) {
    LayoutTensor& tensor = layout_.tensors[static_cast<size_t>(index)];
    const TensorName& name = tensor.name;
    const std::string& tensor_name = tensor.entry.name;
    if (const std::string why = check_dtype(name, tensor.entry.dtype); !why.empty()) {
        problem(ProblemKind::Dtype, tensor_name, why);
        return;
    }
    std::optional<int> bits;
    if (options_.bits_of && tensor.entry.dtype == "U32") bits = options_.bits_of(name.module);
    const ShapeVerdict verdict =
        check_shape(config_, name, tensor.entry.dtype, tensor.entry.shape, bits);
    if (!verdict.ok) {
        tensor.shape_check = ShapeCheck::Mismatch;
        problem(ProblemKind::Shape, tensor_name, verdict.message);
        return;
    }
    if (verdict.packed_width_unchecked) {
        tensor.shape_check = ShapeCheck::Unchecked;
        layout_.unchecked.push_back(tensor_name);
    }
    if (is_conv_role(name.address.role)) note_conv_layout(tensor.entry.shape);
}

void LayoutBuilder::add(const TensorEntry& entry) {
    const auto index = static_cast<int64_t>(layout_.tensors.size());
    layout_.tensors.push_back({entry, classify_tensor(entry.name), ShapeCheck::Ok});
    const TensorName& name = layout_.tensors.back().name;
    const TensorAddress& address = name.address;
    if (address.role == R::Unknown) {
        layout_.unknown.push_back(entry.name);
        return;
    }
    if (address.role == R::Ignored) {
        layout_.ignored.push_back(entry.name);
        return;
    }
    if (address.mtp) {
        ++n_mtp_tensors_;
        ++mtp_prefixes_[name.prefix];
        if (address.layer >= 0) mtp_layers_.insert(address.layer);
        // Without declared MTP layers the head is unused: report once in finish().
        if (config_.mtp_num_hidden_layers == 0) return;
    } else if (address.role == R::LmHead) {
        layout_.head_prefix = name.prefix;
    } else {
        ++trunk_prefixes_[name.prefix];
    }
    int64_t& slot = seen_[address].slot(name.component);
    if (slot >= 0) {
        problem(ProblemKind::Inconsistent, entry.name,
                "same tensor as '" + layout_.tensors[static_cast<size_t>(slot)].entry.name + "'");
        return;
    }
    slot = index;
    if (name.component == TensorComponent::Weight && entry.dtype == "U32") layout_.quantized = true;
    if (const unsigned bit = expert_form_bit(address.role); bit != 0) {
        expert_bits_[{address.mtp, address.layer}] |= bit;
    }
    if (const std::string why = address_problem(name); !why.empty()) {
        problem(ProblemKind::Unexpected, entry.name, why);
        return;
    }
    check_tensor(index);
}

// A packed weight needs its scales; scales and biases need a packed weight.
void LayoutBuilder::check_companions() {
    for (const auto& [address, seen] : seen_) {
        const LayoutTensor* weight =
            seen.weight >= 0 ? &layout_.tensors[static_cast<size_t>(seen.weight)] : nullptr;
        const bool packed = weight != nullptr && weight->entry.dtype == "U32";
        if (packed && seen.scales < 0) {
            problem(ProblemKind::Inconsistent, weight->entry.name,
                    "packed U32 weight without its .scales");
        }
        for (int64_t companion : {seen.scales, seen.biases}) {
            if (companion < 0 || packed) continue;
            const std::string& companion_name =
                layout_.tensors[static_cast<size_t>(companion)].entry.name;
            problem(ProblemKind::Inconsistent, companion_name,
                    weight == nullptr ? "quantization companion without its .weight"
                                      : "quantization companion of a non-U32 weight");
        }
    }
}

void LayoutBuilder::settle_prefixes() {
    auto most_common = [](const std::map<NamePrefix, int64_t>& counts) {
        NamePrefix best = NamePrefix::None;
        int64_t best_count = 0;
        for (const auto& [prefix, count] : counts) {
            if (count > best_count) {
                best = prefix;
                best_count = count;
            }
        }
        return best;
    };
    layout_.trunk_prefix = most_common(trunk_prefixes_);
    layout_.mtp.prefix = most_common(mtp_prefixes_);
    for (const auto* counts : {&trunk_prefixes_, &mtp_prefixes_}) {
        if (counts->size() <= 1) continue;
        std::string list;
        for (const auto& [prefix, count] : *counts) {
            list += (list.empty() ? "" : ", ") + std::string(name_prefix_text(prefix)) + " (" +
                    std::to_string(count) + ")";
        }
        problem(ProblemKind::Inconsistent, "", "mixed name prefixes: " + list);
    }
    const bool mlx_trunk = layout_.trunk_prefix == NamePrefix::LanguageModelModel;
    const bool mlx_head = layout_.head_prefix == NamePrefix::LanguageModelLmHead;
    if (layout_.head_prefix != NamePrefix::None && layout_.trunk_prefix != NamePrefix::None &&
        mlx_trunk != mlx_head) {
        problem(ProblemKind::Inconsistent, "",
                "lm_head prefix " + std::string(name_prefix_text(layout_.head_prefix)) +
                    " does not match trunk prefix " +
                    std::string(name_prefix_text(layout_.trunk_prefix)));
    }
}

void LayoutBuilder::require(const TensorAddress& address, NamePrefix prefix) {
    if (!has_weight(address)) layout_.missing.push_back(tensor_name_of(address, prefix));
}

ExpertForm LayoutBuilder::require_experts(int64_t layer, bool mtp, NamePrefix prefix) {
    const auto it = expert_bits_.find({mtp, layer});
    const ExpertForm form = form_of_bits(it == expert_bits_.end() ? 0 : it->second);
    auto at = [&](TensorRole role, int64_t expert = -1) {
        return TensorAddress{role, mtp, layer, expert, -1};
    };
    switch (form) {
        case ExpertForm::None:  // report the HF fused names
        case ExpertForm::Fused:
            require(at(R::ExpertsGateUp), prefix);
            require(at(R::ExpertsDown), prefix);
            break;
        case ExpertForm::MlxStacked:
            for (TensorRole role : {R::SwitchGate, R::SwitchUp, R::SwitchDown})
                require(at(role), prefix);
            break;
        case ExpertForm::PerExpert:
            for (int64_t expert = 0; expert < config_.num_experts; ++expert) {
                for (TensorRole role : {R::ExpertGate, R::ExpertUp, R::ExpertDown}) {
                    require(at(role, expert), prefix);
                }
            }
            break;
        case ExpertForm::Mixed:
            problem(ProblemKind::Inconsistent, "",
                    std::string(mtp ? "MTP layer " : "layer ") + std::to_string(layer) +
                        " mixes fused, per-expert and switch_mlp expert tensors");
            break;
    }
    return form;
}

void LayoutBuilder::require_layer(int64_t layer, bool mtp, NamePrefix prefix) {
    auto at = [&](TensorRole role) { return TensorAddress{role, mtp, layer, -1, -1}; };
    for (TensorRole role = R::AttnHcNorm; role <= R::MlpHcBlockInject;
         role = static_cast<TensorRole>(static_cast<int>(role) + 1)) {
        require(at(role), prefix);
    }
    const LayerType type =
        mtp ? LayerType::QwenSparseAttention : config_.layer_types[static_cast<size_t>(layer)];
    if (type == LayerType::LinearAttention) {
        for (TensorRole role = R::GdnInProjQkv; role <= R::GdnOutProj;
             role = static_cast<TensorRole>(static_cast<int>(role) + 1)) {
            require(at(role), prefix);
        }
    } else {
        const TensorRole last = config_.has_indexer() ? R::IndexerKNorm : R::QsaKNorm;
        for (TensorRole role = R::QsaQProj; role <= last;
             role = static_cast<TensorRole>(static_cast<int>(role) + 1)) {
            require(at(role), prefix);
        }
        if (config_.attention_bias) {
            for (TensorRole role : {R::QsaQProj, R::QsaKProj, R::QsaVProj, R::QsaOProj}) {
                const auto it = seen_.find(at(role));
                if (it != seen_.end() && it->second.bias >= 0) continue;
                std::string name = tensor_name_of(at(role), prefix);
                name.replace(name.size() - 6, 6, "bias");  // ".weight" → ".bias"
                layout_.missing.push_back(name);
            }
        }
    }
    for (TensorRole role : {R::Router, R::SharedExpertGateProj, R::SharedExpertUpProj,
                            R::SharedExpertDownProj, R::SharedExpertGate}) {
        require(at(role), prefix);
    }
    const ExpertForm form = require_experts(layer, mtp, prefix);
    if (mtp) {
        layout_.mtp.expert_form = combine_forms(layout_.mtp.expert_form, form);
    } else {
        layout_.expert_form = combine_forms(layout_.expert_form, form);
    }
    if (mtp || !config_.ple_layer_index[static_cast<size_t>(layer)]) return;
    for (TensorRole role : {R::PleKeyProj, R::PleValueProj, R::PleNormKey, R::PleNormQuery,
                            R::PleNormConv, R::PleConv1d}) {
        require(at(role), prefix);
    }
    describe_ple_layer(layer, *config_.ple_layer_index[static_cast<size_t>(layer)]);
}

// Shards in numeric order, row offsets from their shapes, rows summing to padded_rows (§2.7).
void LayoutBuilder::describe_ple_layer(int64_t layer, int64_t ple_index) {
    PleLayerLayout ple;
    ple.layer = layer;
    ple.ple_layer_index = ple_index;
    ple.expected_rows = padded_rows_.at(static_cast<size_t>(ple_index));
    auto at = [&](TensorRole role, int64_t shard = -1) {
        return TensorAddress{role, false, layer, -1, shard};
    };
    ple.has_layer_multipliers = has_weight(at(R::PleLayerMultipliers));
    ple.has_head_vocab_sizes = has_weight(at(R::PleHeadVocabSizes));
    ple.has_head_offsets = has_weight(at(R::PleHeadOffsets));
    ple.has_weight_scale = has_weight(at(R::PleWeightScale));

    std::vector<int64_t> pieces;  // tensor indices in table order
    const auto first = seen_.lower_bound(at(R::NgramShard, 0));
    for (auto it = first; it != seen_.end() && it->first.role == R::NgramShard && !it->first.mtp &&
                          it->first.layer == layer;
         ++it) {
        if (it->second.weight >= 0) pieces.push_back(it->second.weight);
    }
    const bool table = has_weight(at(R::NgramTable));
    const std::string table_name = tensor_name_of(at(R::NgramTable), layout_.trunk_prefix);
    if (table && !pieces.empty()) {
        problem(ProblemKind::Shards, table_name, "both a concatenated table and shards");
    }
    if (table) {
        ple.concatenated = true;
        pieces = {seen_.at(at(R::NgramTable)).weight};
    }
    if (pieces.empty())
        layout_.missing.push_back(tensor_name_of(at(R::NgramShard, 0), layout_.trunk_prefix));

    int64_t next_shard = 0;
    for (const int64_t piece : pieces) {
        const LayoutTensor& tensor = layout_.tensors[static_cast<size_t>(piece)];
        const int64_t shard = table ? 0 : tensor.name.address.shard;
        if (shard != next_shard) {
            const std::string gap = shard - 1 == next_shard
                                        ? "shard " + std::to_string(next_shard) + " is"
                                        : "shards " + std::to_string(next_shard) + ".." +
                                              std::to_string(shard - 1) + " are";
            problem(ProblemKind::Shards, tensor.entry.name,
                    gap + " missing (shards are numbered 0..n-1)");
        }
        next_shard = shard + 1;
        const int64_t rows = tensor.entry.shape.size() == 2 ? tensor.entry.shape[0] : 0;
        ple.shards.push_back({shard, tensor.entry.name, ple.rows, rows});
        if (rows < 0 || __builtin_add_overflow(ple.rows, rows, &ple.rows)) {
            problem(ProblemKind::Shards, tensor.entry.name, "row count overflows");
            break;
        }
    }
    if (!pieces.empty() && ple.rows != ple.expected_rows) {
        problem(ProblemKind::Shards, table ? table_name : ple.shards.front().name,
                "n-gram table of layer " + std::to_string(layer) + " has " +
                    std::to_string(ple.rows) + " rows, expected padded_rows " +
                    std::to_string(ple.expected_rows));
    }
    if (!table && !pieces.empty() &&
        static_cast<int64_t>(pieces.size()) != config_.split_ngram_parts) {
        layout_.notes.push_back(
            "layer " + std::to_string(layer) + " has " + std::to_string(pieces.size()) +
            " n-gram shards, split_ngram_parts is " + std::to_string(config_.split_ngram_parts));
    }
    layout_.ple_layers.push_back(std::move(ple));
}

void LayoutBuilder::require_globals() {
    const NamePrefix prefix = layout_.trunk_prefix;
    auto global = [](TensorRole role) { return TensorAddress{role, false, -1, -1, -1}; };
    for (TensorRole role : {R::EmbedTokens, R::FinalHcNorm, R::FinalMixDown, R::FinalMixUp}) {
        require(global(role), prefix);
    }
    layout_.lm_head_tied = config_.tie_word_embeddings;
    const bool head = has_weight(global(R::LmHead));
    if (!config_.tie_word_embeddings) {
        require(global(R::LmHead), prefix);
    } else if (head) {
        layout_.notes.push_back(
            "lm_head present although tie_word_embeddings is true; the head "
            "is embed_tokens");
    }
}

void LayoutBuilder::require_mtp() {
    MtpLayout& mtp = layout_.mtp;
    mtp.declared_layers = config_.mtp_num_hidden_layers;
    mtp.present = n_mtp_tensors_ > 0;
    mtp.layers.assign(mtp_layers_.begin(), mtp_layers_.end());
    auto global = [](TensorRole role) { return TensorAddress{role, true, -1, -1, -1}; };
    mtp.dedicated_embeddings =
        has_weight(global(R::MtpEmbedTokens)) || has_weight(global(R::MtpLmHead));
    if (!mtp.present) {
        if (mtp.declared_layers > 0) {
            layout_.notes.push_back("config declares " + std::to_string(mtp.declared_layers) +
                                    " MTP layer(s) but the checkpoint has no MTP tensors; MTP "
                                    "disabled");
        }
        return;
    }
    if (mtp.declared_layers == 0) {
        layout_.notes.push_back("checkpoint has " + std::to_string(n_mtp_tensors_) +
                                " MTP tensors but mtp_num_hidden_layers is 0; MTP unused");
        return;
    }
    const NamePrefix prefix = mtp.prefix;
    for (TensorRole role = R::MtpPreFcNormEmbedding; role <= R::MtpMixUp;
         role = static_cast<TensorRole>(static_cast<int>(role) + 1)) {
        require(global(role), prefix);
    }
    if (config_.mtp_use_dedicated_embeddings) {
        require(global(R::MtpEmbedTokens), prefix);
        require(global(R::MtpLmHead), prefix);
    } else if (mtp.dedicated_embeddings) {
        layout_.notes.push_back(
            "MTP embed_tokens / shared_head present but "
            "mtp_use_dedicated_embeddings is false; the trunk's are used");
    }
    for (int64_t layer = 0; layer < mtp.declared_layers; ++layer)
        require_layer(layer, true, prefix);
}

void LayoutBuilder::decide_norm_convention() {
    std::vector<std::string>& signals = layout_.layout_signals;
    int n_hf = 0;
    int n_mlx = 0;
    auto signal = [&](bool hf, const std::string& text) {
        (hf ? n_hf : n_mlx) += 1;
        signals.push_back(text);
    };
    if (conv_hf_) signal(true, "conv1d stored [C, 1, K] (HF)");
    if (conv_mlx_) signal(false, "conv1d stored [C, K, 1] (MLX)");
    layout_.conv_layout = conv_hf_ && conv_mlx_ ? ConvLayout::Mixed
                          : conv_hf_            ? ConvLayout::Hf
                          : conv_mlx_           ? ConvLayout::Mlx
                                                : ConvLayout::Unknown;
    if (layout_.trunk_prefix == NamePrefix::ModelLanguageModel) {
        signal(true, "prefix model.language_model. (HF)");
    }
    if (layout_.trunk_prefix == NamePrefix::LanguageModelModel) {
        signal(false, "prefix language_model.model. (MLX)");
    }
    for (const auto& [key, bits] : expert_bits_) {
        if (bits & kFused) signal(true, "fused experts.gate_up_proj (HF)");
        if (bits & kPerExpert) signal(true, "per-expert experts.{e}.* (HF)");
        if (bits & kStacked) signal(false, "switch_mlp stacked experts (MLX)");
        break;  // the first layer speaks for all; Mixed forms are reported separately
    }
    if (layout_.quantized) signal(false, "MLX-packed U32 weights (MLX)");
    const bool mlx_vlm = std::any_of(layout_.ple_layers.begin(), layout_.ple_layers.end(),
                                     [](const PleLayerLayout& ple) { return ple.concatenated; });
    // A concatenated table alone is no MLX signal (HF's runtime module is one table too); with
    // MLX signals it marks the mlx-vlm port, which folds the +1 (docs/formats.md §3.9).
    const bool folded = mlx_vlm && n_mlx > 0;
    if (folded) signal(false, "concatenated n-gram table with MLX layout (mlx-vlm)");
    if (folded) {
        layout_.norm_convention = NormConvention::Folded;
    } else if (n_mlx == 0 && n_hf > 0) {
        layout_.norm_convention = NormConvention::ZeroCentred;
    } else {
        layout_.norm_convention = NormConvention::Undetermined;
    }
}

void LayoutBuilder::finish() {
    check_companions();
    settle_prefixes();
    if (layout_.trunk_prefix == NamePrefix::None)
        layout_.trunk_prefix = NamePrefix::ModelLanguageModel;
    if (layout_.mtp.prefix == NamePrefix::None) layout_.mtp.prefix = NamePrefix::Mtp;
    require_globals();
    for (const NgramHash& hash : build_all_ngram_hashes(config_)) {
        padded_rows_.push_back(hash.padded_rows);
    }
    for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
        require_layer(layer, false, layout_.trunk_prefix);
    }
    require_mtp();
    decide_norm_convention();
    for (size_t index = 0; index < layout_.unknown.size() && index < kMaxLoggedUnknown; ++index) {
        log_warn("qwen4_exp", "unknown tensor '" + layout_.unknown[index] + "'");
    }
    if (layout_.unknown.size() > kMaxLoggedUnknown) {
        log_warn("qwen4_exp", "... and " +
                                  std::to_string(layout_.unknown.size() - kMaxLoggedUnknown) +
                                  " more unknown tensors");
    }
}

}  // namespace

std::string_view shape_check_name(ShapeCheck check) {
    switch (check) {
        case ShapeCheck::Ok: return "ok";
        case ShapeCheck::Mismatch: return "mismatch";
        case ShapeCheck::Unchecked: return "unchecked";
    }
    return "unknown";
}

std::string_view expert_form_name(ExpertForm form) {
    switch (form) {
        case ExpertForm::None: return "none";
        case ExpertForm::Fused: return "fused";
        case ExpertForm::PerExpert: return "per_expert";
        case ExpertForm::MlxStacked: return "mlx_stacked";
        case ExpertForm::Mixed: return "mixed";
    }
    return "unknown";
}

std::string_view conv_layout_name(ConvLayout layout) {
    switch (layout) {
        case ConvLayout::Unknown: return "unknown";
        case ConvLayout::Hf: return "hf";
        case ConvLayout::Mlx: return "mlx";
        case ConvLayout::Mixed: return "mixed";
    }
    return "unknown";
}

std::string_view norm_convention_name(NormConvention convention) {
    switch (convention) {
        case NormConvention::ZeroCentred: return "zero_centred";
        case NormConvention::Folded: return "folded";
        case NormConvention::Undetermined: return "undetermined";
    }
    return "unknown";
}

std::string_view problem_kind_name(ProblemKind kind) {
    switch (kind) {
        case ProblemKind::Shape: return "shape";
        case ProblemKind::Dtype: return "dtype";
        case ProblemKind::Unexpected: return "unexpected";
        case ProblemKind::Shards: return "shards";
        case ProblemKind::Inconsistent: return "inconsistent";
    }
    return "unknown";
}

CheckpointLayout describe_layout(const Config& config, const std::vector<TensorEntry>& tensors,
                                 const LayoutOptions& options) {
    CheckpointLayout layout;
    layout.tensors.reserve(tensors.size());
    LayoutBuilder builder(config, options, layout);
    for (const TensorEntry& entry : tensors) builder.add(entry);
    builder.finish();
    return layout;
}

void require_loadable(const CheckpointLayout& layout, const std::string& source) {
    if (layout.ok()) return;
    constexpr size_t kShown = 5;
    std::string message = source + ": checkpoint does not match its config:";
    if (!layout.missing.empty()) {
        message += " " + std::to_string(layout.missing.size()) + " missing tensor(s) (";
        for (size_t index = 0; index < layout.missing.size() && index < kShown; ++index) {
            message += (index > 0 ? ", " : "") + layout.missing[index];
        }
        message += layout.missing.size() > kShown ? ", ...)" : ")";
    }
    if (!layout.problems.empty()) {
        message += (layout.missing.empty() ? " " : "; ") + std::to_string(layout.problems.size()) +
                   " problem(s): ";
        for (size_t index = 0; index < layout.problems.size() && index < kShown; ++index) {
            const LayoutProblem& problem = layout.problems[index];
            message += (index > 0 ? "; " : "") +
                       (problem.tensor.empty() ? "" : "'" + problem.tensor + "': ") +
                       problem.message;
        }
        if (layout.problems.size() > kShown) message += "; ...";
    }
    throw_corrupt(message);
}

}  // namespace cherenkov::model_data::qwen4_exp
