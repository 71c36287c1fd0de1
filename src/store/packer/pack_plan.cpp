#include "store/packer/pack_plan.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "store/packer/row_quantizer.h"

namespace cherenkov::store {

namespace {

namespace q4 = model_data::qwen4_exp;
using model_data::Dtype;
using R = q4::TensorRole;

constexpr int kMainGroup = 64;
constexpr int kNgramGroup = 32;
constexpr uint64_t kBigTensorBytes = 1 << 20;

// Zero-centred RMSNorm weights applied as 1 + w (docs/qwen4_exp.md §2.2–2.7, §6.2). The gated
// GDN norm (linear_attn.norm) is plain w and is deliberately absent.
bool is_one_plus_norm(R role) {
    switch (role) {
        case R::FinalHcNorm:
        case R::AttnHcNorm:
        case R::MlpHcNorm:
        case R::QsaQNorm:
        case R::QsaKNorm:
        case R::IndexerQNorm:
        case R::IndexerKNorm:
        case R::PleNormKey:
        case R::PleNormQuery:
        case R::PleNormConv:
        case R::MtpPreFcNormEmbedding:
        case R::MtpPreFcNormHidden:
        case R::MtpHcNorm: return true;
        default: return false;
    }
}

bool is_expert_role(R role) {
    switch (role) {
        case R::ExpertsGateUp:
        case R::ExpertsDown:
        case R::ExpertGate:
        case R::ExpertUp:
        case R::ExpertDown:
        case R::SwitchGate:
        case R::SwitchUp:
        case R::SwitchDown: return true;
        default: return false;
    }
}

bool is_float(Dtype dtype) {
    return dtype == Dtype::BF16 || dtype == Dtype::F16 || dtype == Dtype::F32;
}

std::string canonical_name(const q4::LayoutTensor& tensor) {
    q4::TensorAddress address = tensor.name.address;
    std::string name =
        q4::tensor_name_of(address, address.mtp ? q4::NamePrefix::Mtp : q4::NamePrefix::Model);
    if (name.empty()) name = tensor.entry.name;
    if (tensor.name.component == q4::TensorComponent::Bias) {
        const std::string suffix = ".weight";
        if (name.size() > suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
            name.resize(name.size() - suffix.size());
        }
        name += ".bias";
    }
    return name;
}

// Appends ranges to a file being planned, aligned for direct use from a mapping.
class FileCursor {
public:
    ByteRange take(uint64_t n_bytes) {
        const uint64_t alignment = n_bytes >= kBigTensorBytes ? kRecordAlign : kPartAlign;
        cursor_ = align_up(cursor_, alignment);
        ByteRange range{cursor_, n_bytes};
        cursor_ += n_bytes;
        return range;
    }
    uint64_t size() const { return align_up(cursor_, kPartAlign); }

private:
    uint64_t cursor_ = 0;
};

struct MlxParts {
    RowSlice codes;
    RowSlice scales;
    RowSlice biases;
    int bits = 4;
    int group_size = 64;
    uint64_t cols = 0;
};

// The packed parts of one MLX-quantized module, with bits and group size checked against the
// shapes. `first_row` / `n_rows` select rows of the flattened [.., out] dims.
MlxParts mlx_parts(const SourceModel& source, const std::string& weight_name,
                   const std::string& module, uint64_t first_row, uint64_t n_rows) {
    const model_data::LocatedTensor codes = source.require(weight_name);
    const model_data::LocatedTensor scales = source.require(module + ".scales");
    const model_data::LocatedTensor biases = source.require(module + ".biases");
    MlxParts parts;
    auto params = source.quantization ? source.quantization->params_for(module) : std::nullopt;
    if (!params)
        throw_invalid(source.path + ": tensor '" + weight_name +
                      "' is packed but its module is not quantized in config.json");
    if (params->mode != model_data::QuantMode::Affine) {
        throw_unsupported(source.path + ": tensor '" + weight_name +
                          "': only MLX affine quantization is supported");
    }
    if (scales.tensor->dtype != Dtype::BF16 || biases.tensor->dtype != Dtype::BF16) {
        throw_unsupported(source.path + ": tensor '" + module +
                          ".scales': scales and biases must be BF16");
    }
    parts.bits = params->bits;
    const uint64_t packed = codes.tensor->shape.back();
    parts.cols = packed * 32 / static_cast<uint64_t>(parts.bits);
    const uint64_t n_groups = scales.tensor->shape.back();
    if (n_groups == 0 || parts.cols % n_groups != 0) {
        throw_corrupt(source.path + ": tensor '" + module +
                      ".scales': shape does not match the packed weight");
    }
    parts.group_size = static_cast<int>(parts.cols / n_groups);
    if (parts.group_size != params->group_size) {
        throw_corrupt(source.path + ": tensor '" + module + "': group size " +
                      std::to_string(parts.group_size) + " from shapes, " +
                      std::to_string(params->group_size) + " in config.json");
    }
    parts.codes = row_slice(codes, first_row, n_rows);
    parts.scales = row_slice(scales, first_row, n_rows);
    parts.biases = row_slice(biases, first_row, n_rows);
    return parts;
}

void require_main_group(const SourceModel& source, const std::string& name, int group_size) {
    if (group_size != kMainGroup) {
        throw_unsupported(
            source.path + ": tensor '" + name + "' uses group size " + std::to_string(group_size) +
            ": Cherenkov needs group size 64; 32 is accepted only for the n-gram table");
    }
}

// Whether the source's 1+w norms are stored zero-centred (and must be folded).
bool source_norms_zero_centred(const SourceModel& source) {
    switch (source.layout.norm_convention) {
        case q4::NormConvention::ZeroCentred: return true;
        case q4::NormConvention::Folded: return false;
        case q4::NormConvention::Undetermined: break;
    }
    // Decide by the weights: zero-centred norms sit near 0, folded ones near 1.
    double sum = 0.0;
    uint64_t count = 0;
    std::vector<std::byte> bytes;
    std::vector<float> values;
    for (const q4::LayoutTensor& tensor : source.layout.tensors) {
        if (!is_one_plus_norm(tensor.name.address.role) ||
            tensor.name.component != q4::TensorComponent::Weight)
            continue;
        const model_data::LocatedTensor located = source.require(tensor.entry.name);
        if (!is_float(located.tensor->dtype)) continue;
        bytes.resize(located.tensor->n_bytes());
        located.file->read_tensor_bytes(*located.tensor, 0, bytes);
        values.resize(located.tensor->n_elements);
        decode_floats(bytes, located.tensor->dtype, values, tensor.entry.name);
        for (float value : values) sum += value;
        count += values.size();
    }
    return count == 0 || sum / static_cast<double>(count) < 0.5;
}

void plan_dense(const SourceModel& source, PackPlan& plan, FileCursor& cursor, bool fold_norms) {
    for (const q4::LayoutTensor& tensor : source.layout.tensors) {
        const R role = tensor.name.address.role;
        const q4::TensorComponent component = tensor.name.component;
        if (role == R::Ignored || role == R::Unknown || is_expert_role(role) ||
            role == R::NgramShard || role == R::NgramTable) {
            continue;
        }
        if (component == q4::TensorComponent::Scales || component == q4::TensorComponent::Biases)
            continue;
        const model_data::LocatedTensor located = source.require(tensor.entry.name);
        const model_data::TensorInfo& info = *located.tensor;
        DenseJob job;
        job.entry.name = canonical_name(tensor);
        job.source_dtype = info.dtype;
        if (info.dtype == Dtype::U32 && component == q4::TensorComponent::Weight) {
            const MlxParts parts =
                mlx_parts(source, tensor.entry.name, tensor.name.module, 0, total_rows(info));
            require_main_group(source, tensor.entry.name, parts.group_size);
            job.action = DenseAction::CopyAffine;
            job.entry.encoding = DenseEncoding::Affine;
            job.entry.shape = {parts.codes.n_rows, parts.cols};
            job.entry.bits = parts.bits;
            job.entry.group_size = parts.group_size;
            job.weight = parts.codes;
            job.scales = parts.scales;
            job.biases = parts.biases;
            job.entry.data = cursor.take(parts.codes.n_bytes());
            job.entry.scales = cursor.take(parts.scales.n_bytes());
            job.entry.biases = cursor.take(parts.biases.n_bytes());
            plan.source_bytes +=
                parts.codes.n_bytes() + parts.scales.n_bytes() + parts.biases.n_bytes();
            plan.dense.push_back(std::move(job));
            continue;
        }
        job.weight = whole_tensor(located);
        plan.source_bytes += info.n_bytes();
        if (info.dtype == Dtype::I64) {
            job.action = DenseAction::CopyI64;
            job.entry.encoding = DenseEncoding::I64;
            job.entry.shape = info.shape;
            job.entry.data = cursor.take(info.n_bytes());
            plan.dense.push_back(std::move(job));
            continue;
        }
        if (!is_float(info.dtype)) {
            throw_unsupported(source.path + ": tensor '" + tensor.entry.name + "': dtype " +
                              std::string(model_data::dtype_name(info.dtype)) +
                              " cannot be packed");
        }
        const bool quantize = !source.mlx && component == q4::TensorComponent::Weight &&
                              q4::is_quantizable_role(role) && role != R::Router &&
                              info.shape.size() == 2 && info.shape[1] % kMainGroup == 0;
        if (quantize) {
            job.action = DenseAction::Quantize;
            job.entry.encoding = DenseEncoding::Affine;
            job.entry.shape = info.shape;
            job.entry.bits = 4;
            job.entry.group_size = kMainGroup;
            job.entry.data = cursor.take(affine_code_bytes(info.shape[0], info.shape[1], 4));
            job.entry.scales =
                cursor.take(affine_scale_bytes(info.shape[0], info.shape[1], kMainGroup));
            job.entry.biases =
                cursor.take(affine_scale_bytes(info.shape[0], info.shape[1], kMainGroup));
            plan.dense.push_back(std::move(job));
            continue;
        }
        const bool norm = is_one_plus_norm(role) && component == q4::TensorComponent::Weight;
        job.action = norm && fold_norms ? DenseAction::FoldToF32 : DenseAction::ToF32;
        job.entry.encoding = DenseEncoding::F32;
        job.entry.shape = info.shape;
        if (role == R::GdnConv1d || role == R::PleConv1d) {
            // [C, 1, K] (HF) and [C, K, 1] (MLX) hold the same bytes; the store says [C, K].
            job.entry.shape.clear();
            for (uint64_t dim : info.shape) {
                if (dim != 1) job.entry.shape.push_back(dim);
            }
        }
        job.entry.data = cursor.take(info.n_elements * 4);
        plan.dense.push_back(std::move(job));
    }
}

void plan_ngram(const SourceModel& source, PackPlan& plan, FileCursor& cursor) {
    const uint64_t width = static_cast<uint64_t>(source.config.ngram_head_dim);
    for (const q4::PleLayerLayout& layer : source.layout.ple_layers) {
        NgramJob job;
        job.entry.layer = layer.layer;
        job.entry.width = width;
        job.entry.bits = 4;
        job.entry.group_size = kNgramGroup;
        if (width == 0 || width % kNgramGroup != 0) {
            throw_unsupported(source.path + ": layer " + std::to_string(layer.layer) +
                              ": n-gram width " + std::to_string(width) +
                              " is not a multiple of 32");
        }
        for (const q4::NgramShardInfo& shard : layer.shards) {
            const model_data::LocatedTensor located = source.require(shard.name);
            NgramPiece piece;
            piece.source_dtype = located.tensor->dtype;
            if (located.tensor->dtype == Dtype::U32) {
                std::string module =
                    shard.name.substr(0, shard.name.size() - std::string(".weight").size());
                const MlxParts parts =
                    mlx_parts(source, shard.name, module, 0, total_rows(*located.tensor));
                if (parts.bits != 4 || parts.group_size != kNgramGroup || parts.cols != width) {
                    throw_unsupported(
                        source.path + ": tensor '" + shard.name + "' is " +
                        std::to_string(parts.bits) + "-bit group " +
                        std::to_string(parts.group_size) +
                        ": Cherenkov needs the n-gram table in 4 bits, group size 32");
                }
                piece.quantized = true;
                piece.weight = parts.codes;
                piece.scales = parts.scales;
                piece.biases = parts.biases;
                plan.source_bytes +=
                    parts.codes.n_bytes() + parts.scales.n_bytes() + parts.biases.n_bytes();
            } else {
                if (!is_float(located.tensor->dtype) || located.tensor->shape.back() != width) {
                    throw_unsupported(source.path + ": tensor '" + shard.name +
                                      "': expected float rows of width " + std::to_string(width));
                }
                piece.weight = whole_tensor(located);
                plan.source_bytes += located.tensor->n_bytes();
            }
            job.entry.rows += piece.weight.n_rows;
            job.pieces.push_back(piece);
        }
        job.entry.row_bytes =
            affine_code_bytes(1, width, 4) + 2 * affine_scale_bytes(1, width, kNgramGroup);
        job.entry.range = cursor.take(job.entry.rows * job.entry.row_bytes);
        plan.ngram.push_back(std::move(job));
    }
}

void index_experts(const SourceModel& source, PackPlan& plan) {
    for (const q4::LayoutTensor& tensor : source.layout.tensors) {
        if (!is_expert_role(tensor.name.address.role) ||
            tensor.name.component != q4::TensorComponent::Weight)
            continue;
        const q4::TensorAddress& address = tensor.name.address;
        plan.expert_tensors[{address.mtp, address.layer, static_cast<int>(address.role),
                             address.expert}] = tensor.entry.name;
    }
}

const std::string* expert_tensor(const PackPlan& plan, bool mtp, int64_t layer, R role,
                                 int64_t expert) {
    auto found = plan.expert_tensors.find({mtp, layer, static_cast<int>(role), expert});
    return found == plan.expert_tensors.end() ? nullptr : &found->second;
}

ProjectionSource projection_rows(const SourceModel& source, const std::string& name,
                                 uint64_t first_row, uint64_t n_rows, uint64_t cols) {
    const model_data::LocatedTensor located = source.require(name);
    ProjectionSource projection;
    projection.source_dtype = located.tensor->dtype;
    if (located.tensor->dtype == Dtype::U32) {
        const std::string module =
            name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0
                ? name.substr(0, name.size() - 7)
                : name;
        const MlxParts parts = mlx_parts(source, name, module, first_row, n_rows);
        require_main_group(source, name, parts.group_size);
        if (parts.bits != 4 || parts.cols != cols) {
            throw_unsupported(source.path + ": tensor '" + name + "' is " +
                              std::to_string(parts.bits) +
                              "-bit: routed experts must be 4-bit group 64 MLX affine");
        }
        projection.quantized = true;
        projection.weight = parts.codes;
        projection.scales = parts.scales;
        projection.biases = parts.biases;
        return projection;
    }
    if (!is_float(located.tensor->dtype) || located.tensor->shape.back() != cols) {
        throw_unsupported(source.path + ": tensor '" + name + "': expected float rows of width " +
                          std::to_string(cols));
    }
    projection.weight = row_slice(located, first_row, n_rows);
    return projection;
}

}  // namespace

PackPlan plan_pack(const SourceModel& source) {
    PackPlan plan;
    const q4::Config& config = source.config;
    const bool fold_norms = source_norms_zero_centred(source);
    plan.manifest.source.path = source.path;
    plan.manifest.source.kind = source.kind();
    plan.manifest.source.norm_convention =
        std::string(q4::norm_convention_name(source.layout.norm_convention));
    plan.manifest.norms_folded = true;

    FileCursor unused_cursor;
    plan_dense(source, plan, unused_cursor, fold_norms);
    // Canonical order, so a store's dense.bin does not depend on the source's tensor order.
    std::sort(plan.dense.begin(), plan.dense.end(),
              [](const DenseJob& a, const DenseJob& b) { return a.entry.name < b.entry.name; });
    FileCursor dense_cursor;
    for (DenseJob& job : plan.dense) {
        job.entry.data = dense_cursor.take(job.entry.data.n_bytes);
        if (job.entry.encoding != DenseEncoding::Affine) continue;
        job.entry.scales = dense_cursor.take(job.entry.scales.n_bytes);
        job.entry.biases = dense_cursor.take(job.entry.biases.n_bytes);
    }
    plan.manifest.dense_bytes = dense_cursor.size();
    FileCursor ngram_cursor;
    plan_ngram(source, plan, ngram_cursor);
    plan.manifest.ngram_bytes = ngram_cursor.size();
    for (const DenseJob& job : plan.dense) plan.manifest.dense.push_back(job.entry);
    for (const NgramJob& job : plan.ngram) plan.manifest.ngram.push_back(job.entry);

    const int64_t n_mtp =
        source.layout.mtp.present ? static_cast<int64_t>(source.layout.mtp.layers.size()) : 0;
    plan.disable_mtp_in_config = n_mtp == 0 && config.mtp_num_hidden_layers > 0;
    plan.manifest.has_mtp = n_mtp > 0;
    plan.manifest.experts =
        make_expert_layout(static_cast<uint64_t>(config.hidden_size),
                           static_cast<uint64_t>(config.moe_intermediate_size), 4, kMainGroup,
                           config.num_hidden_layers, n_mtp, config.num_experts);
    plan.manifest.experts_bytes = plan.manifest.experts.file_bytes();
    index_experts(source, plan);
    for (int64_t layer = 0; layer < plan.manifest.experts.n_layers(); ++layer) {
        const ExpertSource first = locate_expert(source, plan, layer, 0);
        plan.source_bytes += static_cast<uint64_t>(config.num_experts) *
                             (first.gate.weight.n_bytes() + first.gate.scales.n_bytes() * 2 +
                              first.up.weight.n_bytes() + first.up.scales.n_bytes() * 2 +
                              first.down.weight.n_bytes() + first.down.scales.n_bytes() * 2);
    }
    return plan;
}

ExpertSource locate_expert(const SourceModel& source, const PackPlan& plan, int64_t layer,
                           int64_t expert) {
    const ExpertLayout& layout = plan.manifest.experts;
    const bool mtp = layer >= layout.n_trunk_layers;
    const int64_t source_layer = mtp ? layer - layout.n_trunk_layers : layer;
    const uint64_t hidden = layout.hidden;
    const uint64_t inter = layout.intermediate;
    const auto e = static_cast<uint64_t>(expert);
    ExpertSource result;
    if (const std::string* gate_up = expert_tensor(plan, mtp, source_layer, R::ExpertsGateUp, -1)) {
        const std::string* down = expert_tensor(plan, mtp, source_layer, R::ExpertsDown, -1);
        if (down == nullptr)
            throw_not_found(source.path + ": '" + *gate_up + "' has no experts.down_proj");
        // Fused [E, 2I, H]: rows [0, I) gate, [I, 2I) up (gate first).
        result.gate = projection_rows(source, *gate_up, e * 2 * inter, inter, hidden);
        result.up = projection_rows(source, *gate_up, e * 2 * inter + inter, inter, hidden);
        result.down = projection_rows(source, *down, e * hidden, hidden, inter);
        return result;
    }
    if (const std::string* gate = expert_tensor(plan, mtp, source_layer, R::SwitchGate, -1)) {
        const std::string* up = expert_tensor(plan, mtp, source_layer, R::SwitchUp, -1);
        const std::string* down = expert_tensor(plan, mtp, source_layer, R::SwitchDown, -1);
        if (up == nullptr || down == nullptr)
            throw_not_found(source.path + ": '" + *gate + "' lacks its up / down projections");
        result.gate = projection_rows(source, *gate, e * inter, inter, hidden);
        result.up = projection_rows(source, *up, e * inter, inter, hidden);
        result.down = projection_rows(source, *down, e * hidden, hidden, inter);
        return result;
    }
    const std::string* gate = expert_tensor(plan, mtp, source_layer, R::ExpertGate, expert);
    const std::string* up = expert_tensor(plan, mtp, source_layer, R::ExpertUp, expert);
    const std::string* down = expert_tensor(plan, mtp, source_layer, R::ExpertDown, expert);
    if (gate == nullptr || up == nullptr || down == nullptr) {
        throw_not_found(source.path + ": " + (mtp ? "MTP layer " : "layer ") +
                        std::to_string(source_layer) + ": expert " + std::to_string(expert) +
                        " has no gate / up / down projections");
    }
    result.gate = projection_rows(source, *gate, 0, inter, hidden);
    result.up = projection_rows(source, *up, 0, inter, hidden);
    result.down = projection_rows(source, *down, 0, hidden, inter);
    return result;
}

}  // namespace cherenkov::store
