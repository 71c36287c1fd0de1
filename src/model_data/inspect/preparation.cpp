#include "model_data/inspect/preparation.h"

#include "base/error.h"
#include "model_data/inspect/report_text.h"
#include "model_data/qwen4_exp/tensor_roles.h"

namespace cherenkov::model_data::inspect {
namespace {

using nlohmann::json;
using qwen4_exp::TensorRole;

bool is_routed_expert(TensorRole role) {
    switch (role) {
        case TensorRole::ExpertsGateUp:
        case TensorRole::ExpertsDown:
        case TensorRole::ExpertGate:
        case TensorRole::ExpertUp:
        case TensorRole::ExpertDown:
        case TensorRole::SwitchGate:
        case TensorRole::SwitchUp:
        case TensorRole::SwitchDown: return true;
        default: return false;
    }
}

bool is_ngram_table(TensorRole role) { return role == TensorRole::NgramShard || role == TensorRole::NgramTable; }

// What the packer quantizes from a float source: every linear weight, embedding and head,
// routed experts in any form; routers stay in full precision (issue 4's conversion rules).
bool packer_quantizes(TensorRole role) {
    if (role == TensorRole::Router) return false;
    return is_routed_expert(role) || qwen4_exp::is_quantizable_role(role);
}

uint64_t n_elements(const LogicalTensor& tensor) {
    uint64_t count = 1;
    for (uint64_t dim : tensor.shape) count *= dim;
    return count;
}

// Bytes of a Q4 encoding with BF16 scales and biases: codes plus two 16-bit values per group.
uint64_t q4_bytes(uint64_t elements, uint64_t group) { return elements / 2 + elements / group * 4; }

uint64_t stored_bytes(const LogicalTensor& tensor) {
    uint64_t elements = n_elements(tensor);
    if (tensor.kind == EncodingKind::Dense) return elements * static_cast<uint64_t>(dtype_bits(tensor.dtype)) / 8;
    uint64_t groups = elements / static_cast<uint64_t>(tensor.params.group_size);
    return elements * static_cast<uint64_t>(tensor.params.bits) / 8 + groups * 4;
}

void check_quantized(const LogicalTensor& tensor, TensorRole role, const std::string& location) {
    const QuantParams& params = tensor.params;
    if (params.mode != QuantMode::Affine) {
        throw_unsupported(location + ": " + tensor.module + ": MLX mode " + std::string(quant_mode_name(params.mode)) +
                          " is not supported; Cherenkov packs affine quantization only");
    }
    bool ngram = is_ngram_table(role);
    if (params.group_size == 64 || (ngram && params.group_size == 32)) return;
    if (params.group_size == 32) {
        throw_unsupported(location + ": " + tensor.module +
                          ": MLX weights quantized in groups of 32: Cherenkov needs group size 64; 32 is accepted "
                          "only for the n-gram table");
    }
    throw_unsupported(location + ": " + tensor.module + ": MLX group size " + std::to_string(params.group_size) +
                      ": Cherenkov needs group size 64 (32 for the n-gram table)");
}

}  // namespace

json describe_preparation(const qwen4_exp::CheckpointLayout& layout, const std::vector<LogicalTensor>& logical,
                          const std::string& location) {
    uint64_t expert_bytes = 0, ngram_bytes = 0, other_bytes = 0, estimated_store = 0;
    size_t n_kept = 0, n_expert_to_quantize = 0, n_dense_to_quantize = 0, n_ngram_to_quantize = 0;
    for (const auto& tensor : logical) {
        TensorRole role = qwen4_exp::classify_tensor(tensor.name).address.role;
        if (role == TensorRole::Ignored) continue;
        if (tensor.kind == EncodingKind::Dense && dtype_is_float(tensor.dtype) && dtype_bits(tensor.dtype) < 16) {
            throw_unsupported(location + ": " + tensor.name + ": " + std::string(dtype_name(tensor.dtype)) +
                              " weights are not supported; Cherenkov packs BF16/F16/F32 or MLX affine checkpoints");
        }
        uint64_t source = stored_bytes(tensor);
        uint64_t packed = source;
        if (tensor.kind == EncodingKind::MlxQuantized) {
            check_quantized(tensor, role, location);
            ++n_kept;
        } else if (packer_quantizes(role) && dtype_is_float(tensor.dtype)) {
            bool ngram = is_ngram_table(role);
            packed = q4_bytes(n_elements(tensor), ngram ? 32 : 64);
            if (is_routed_expert(role)) {
                ++n_expert_to_quantize;
            } else if (ngram) {
                ++n_ngram_to_quantize;
            } else {
                ++n_dense_to_quantize;
            }
        } else if (dtype_is_float(tensor.dtype)) {
            packed = n_elements(tensor) * 4;  // norms, routers, convs... kept as float32
        }
        estimated_store += packed;
        if (is_routed_expert(role)) {
            expert_bytes += source;
        } else if (is_ngram_table(role)) {
            ngram_bytes += source;
        } else {
            other_bytes += source;
        }
    }

    json steps = json::array();
    bool mlx = layout.quantized;
    if (layout.expert_form == qwen4_exp::ExpertForm::Fused) {
        steps.push_back("split fused experts (gate_up_proj, down_proj) into one record per (layer, expert)");
    }
    if (n_kept > 0) steps.push_back("keep " + std::to_string(n_kept) + " MLX-quantized modules bit for bit");
    if (n_expert_to_quantize > 0) {
        steps.push_back("quantize " + std::to_string(n_expert_to_quantize) + " routed-expert tensors (" +
                        format_bytes(expert_bytes) + ") to Q4, group 64");
    }
    if (n_dense_to_quantize > 0) {
        steps.push_back("quantize " + std::to_string(n_dense_to_quantize) +
                        " dense linear weights, embeddings and lm_head to Q4, group 64");
    }
    if (n_ngram_to_quantize > 0) {
        steps.push_back("quantize " + std::to_string(n_ngram_to_quantize) + " n-gram table shards (" +
                        format_bytes(ngram_bytes) + ") to Q4, group 32, rows contiguous");
    }
    steps.push_back("keep routers, convolutions, norm vectors, A_log and dt_bias in full precision");
    if (layout.norm_convention == qwen4_exp::NormConvention::ZeroCentred && !mlx) {
        steps.push_back("fold zero-centred norms (1+w) into float32 weights; the gated GDN norm stays as is");
    } else {
        steps.push_back("record norm convention: " + std::string(qwen4_exp::norm_convention_name(layout.norm_convention)));
    }
    if (layout.mtp.present) {
        steps.push_back("keep the MTP head (" + std::to_string(layout.mtp.layers.size()) +
                        " layer(s)); its experts follow the trunk's");
    } else {
        steps.push_back("no MTP weights: the packed config disables drafting");
    }
    return json{{"supported", true},
                {"source_format", mlx ? "mlx-affine" : "hf-bf16"},
                {"steps", steps},
                {"bytes",
                 {{"routed_experts", expert_bytes},
                  {"ngram_tables", ngram_bytes},
                  {"other", other_bytes},
                  {"estimated_store", estimated_store}}}};
}

}  // namespace cherenkov::model_data::inspect
