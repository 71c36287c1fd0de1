// Uploads dense.bin once and translates ModelWeights' host views into it (device_weights.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_weights.h"

namespace cherenkov::engine::cuda {
namespace {

// Where a range of the host mapping lies in the device copy.
struct UploadedRange {
    uint64_t host_offset = 0;
    uint64_t n_bytes = 0;
    uint64_t device_offset = 0;
};

// Maps host pointers inside the uploaded ranges of one mapped file to their place in its
// device copy; a pointer elsewhere is a bug (a view of something never uploaded).
class Translator {
public:
    Translator(const void* host_base, std::vector<UploadedRange> ranges, const void* device_base)
        : host_(static_cast<const std::byte*>(host_base)),
          ranges_(std::move(ranges)),
          device_(static_cast<const std::byte*>(device_base)) {}

    template <typename T>
    const T* operator()(const T* host, const char* what) const {
        if (host == nullptr) return nullptr;
        const auto* p = reinterpret_cast<const std::byte*>(host);
        if (p >= host_) {
            const auto offset = static_cast<uint64_t>(p - host_);
            // The last range starting at or before `offset`.
            auto it = std::upper_bound(
                ranges_.begin(), ranges_.end(), offset,
                [](uint64_t value, const UploadedRange& r) { return value < r.host_offset; });
            if (it != ranges_.begin()) {
                --it;
                if (offset < it->host_offset + it->n_bytes) {
                    return reinterpret_cast<const T*>(device_ + it->device_offset +
                                                      (offset - it->host_offset));
                }
            }
        }
        throw_internal(std::string("[upload_model_weights] ") + what +
                       " does not point into the uploaded part of dense.bin");
    }

private:
    const std::byte* host_;
    std::vector<UploadedRange> ranges_;  // sorted by host_offset, disjoint
    const std::byte* device_;
};

// Ranges closer than this are uploaded as one, gap included: the padding between a store's
// parts (under 4096 bytes) joins them into a few large copies, while a skipped tensor (the MTP
// head) stays out.
constexpr uint64_t kCoalesceGapBytes = 4096;
// A range keeps its offset modulo this in the device copy, so every part keeps the alignment
// the store gave it (64 bytes, 4096 for parts of 1 MiB or more; docs/store-format.md).
constexpr uint64_t kKeepAlignBytes = 4096;

// The model's resident ranges of dense.bin (sorted, disjoint) laid out back to back for the
// device copy, nearby ones coalesced. The store packs the MTP head's tensors together (names
// sort "mtp." after "model."), so an omitted head leaves one hole, not uploaded.
std::vector<UploadedRange> plan_upload(const std::vector<store::ByteRange>& resident) {
    std::vector<UploadedRange> plan;
    for (const store::ByteRange& range : resident) {
        if (!plan.empty() &&
            range.offset <= plan.back().host_offset + plan.back().n_bytes + kCoalesceGapBytes) {
            plan.back().n_bytes = range.end() - plan.back().host_offset;
            continue;
        }
        UploadedRange next{range.offset, range.n_bytes, 0};
        if (!plan.empty()) {
            const uint64_t free_from = plan.back().device_offset + plan.back().n_bytes;
            const uint64_t base =
                (free_from + kKeepAlignBytes - 1) / kKeepAlignBytes * kKeepAlignBytes;
            next.device_offset = base + range.offset % kKeepAlignBytes;
        } else {
            next.device_offset = range.offset % kKeepAlignBytes;
        }
        plan.push_back(next);
    }
    return plan;
}

DeviceLinear linear(const Linear& l, const Translator& t) {
    DeviceLinear d;
    d.quantized = l.quantized;
    d.rows = l.out_features();
    d.cols = l.in_features();
    if (l.quantized) {
        d.affine.rows = l.affine.rows;
        d.affine.cols = l.affine.cols;
        d.affine.bits = l.affine.bits;
        d.affine.group_size = l.affine.group_size;
        d.affine.codes = t(l.affine.codes, "affine codes");
        d.affine.scales = t(l.affine.scales, "affine scales");
        d.affine.biases = t(l.affine.biases, "affine biases");
    } else {
        d.dense = t(l.dense.data, "float32 weight");
    }
    d.bias = t(l.bias, "bias");
    return d;
}

DeviceHyperConnectionWeights hyper_connection(const HyperConnectionWeights& w,
                                              const Translator& t) {
    DeviceHyperConnectionWeights d;
    d.norm = t(w.norm, "hc norm");
    d.down = linear(w.down, t);
    d.up = linear(w.up, t);
    d.has_inject = w.inject.has_value();
    if (w.inject) d.inject = linear(*w.inject, t);
    return d;
}

DeviceMoeWeights moe(const MoeWeights& w, const Translator& t) {
    DeviceMoeWeights d;
    d.router = linear(w.router, t);
    d.shared_gate = linear(w.shared_gate, t);
    d.shared_up = linear(w.shared_up, t);
    d.shared_down = linear(w.shared_down, t);
    d.shared_expert_gate = linear(w.shared_expert_gate, t);
    d.table_layer = w.table_layer;
    return d;
}

DeviceLayerWeights layer(const LayerWeights& w, const Translator& t) {
    DeviceLayerWeights d;
    d.attn_hc = hyper_connection(w.attn_hc, t);
    d.mlp_hc = hyper_connection(w.mlp_hc, t);
    if (w.gdn) {
        const GatedDeltaNetWeights& g = *w.gdn;
        DeviceGatedDeltaNetWeights dg;
        dg.in_qkv = linear(g.in_qkv, t);
        dg.in_z = linear(g.in_z, t);
        dg.in_b = linear(g.in_b, t);
        dg.in_a = linear(g.in_a, t);
        dg.out = linear(g.out, t);
        dg.conv = t(g.conv, "gdn conv");
        dg.dt_bias = t(g.dt_bias, "gdn dt_bias");
        dg.a_log = t(g.a_log, "gdn A_log");
        dg.norm = t(g.norm, "gdn norm");
        d.gdn = dg;
    }
    if (w.qsa) {
        const SparseAttentionWeights& a = *w.qsa;
        DeviceSparseAttentionWeights da;
        da.q = linear(a.q, t);
        da.k = linear(a.k, t);
        da.v = linear(a.v, t);
        da.o = linear(a.o, t);
        da.q_norm = t(a.q_norm, "q_norm");
        da.k_norm = t(a.k_norm, "k_norm");
        da.has_indexer = a.has_indexer;
        if (a.has_indexer) {
            da.index_qk = linear(a.index_qk, t);
            da.index_q_norm = t(a.index_q_norm, "indexer q norm");
            da.index_k_norm = t(a.index_k_norm, "indexer k norm");
        }
        d.qsa = da;
    }
    d.moe = moe(w.moe, t);
    if (w.ple) {
        const PleWeights& p = *w.ple;
        DevicePleWeights dp;
        dp.key = linear(p.key, t);
        dp.value = linear(p.value, t);
        dp.norm_key = t(p.norm_key, "ple norm_key");
        dp.norm_query = t(p.norm_query, "ple norm_query");
        dp.norm_conv = t(p.norm_conv, "ple norm_conv");
        dp.conv = t(p.conv, "ple conv");
        d.ple = dp;
    }
    return d;
}

// The shared expert's address-table entry and shape, when the expert kernels can run it.
std::optional<std::pair<ExpertAddress, ExpertShape>> shared_expert_entry(
    const DeviceMoeWeights& m) {
    const DeviceLinear* parts[] = {&m.shared_gate, &m.shared_up, &m.shared_down};
    for (const DeviceLinear* l : parts) {
        if (!l->quantized || l->bias != nullptr ||
            reinterpret_cast<uintptr_t>(l->affine.codes) % 16 != 0 ||
            l->affine.bits != m.shared_gate.affine.bits ||
            l->affine.group_size != m.shared_gate.affine.group_size) {
            return std::nullopt;
        }
    }
    const DeviceAffineMatrix& gate = m.shared_gate.affine;
    const DeviceAffineMatrix& up = m.shared_up.affine;
    const DeviceAffineMatrix& down = m.shared_down.affine;
    const ExpertShape shape{gate.cols, gate.rows, gate.bits, gate.group_size};
    if (!affine_gemv_supports(shape.bits, shape.group_size) || up.rows != gate.rows ||
        up.cols != gate.cols || down.rows != gate.cols || down.cols != gate.rows ||
        shape.hidden % shape.group_size != 0 || shape.intermediate % shape.group_size != 0) {
        return std::nullopt;
    }
    return std::pair{ExpertAddress{gate.codes, gate.scales, gate.biases, up.codes, up.scales,
                                   up.biases, down.codes, down.scales, down.biases},
                     shape};
}

// Uploads the entries of every layer whose shared expert the expert kernels can run.
void attach_shared_experts(DeviceModelWeights& d) {
    std::vector<DeviceMoeWeights*> layers;
    for (DeviceLayerWeights& l : d.layers) layers.push_back(&l.moe);
    if (d.mtp) {
        for (DeviceLayerWeights& l : d.mtp->layers) layers.push_back(&l.moe);
    }
    std::vector<ExpertAddress> entries;
    std::vector<size_t> index(layers.size(), SIZE_MAX);
    for (size_t i = 0; i < layers.size(); ++i) {
        if (const auto entry = shared_expert_entry(*layers[i])) {
            index[i] = entries.size();
            entries.push_back(entry->first);
            layers[i]->shared_shape = entry->second;
        }
    }
    if (entries.empty()) return;
    d.shared_experts = DeviceBuffer(entries.size() * sizeof(ExpertAddress));
    d.shared_experts.upload(entries.data(), entries.size() * sizeof(ExpertAddress));
    for (size_t i = 0; i < layers.size(); ++i) {
        if (index[i] != SIZE_MAX)
            layers[i]->shared_expert = d.shared_experts.as<ExpertAddress>() + index[i];
    }
}

}  // namespace

DeviceLinear translate_linear(const Linear& l, const void* host_base, uint64_t n_bytes,
                              const void* device_base) {
    return linear(l, Translator(host_base, {UploadedRange{0, n_bytes, 0}}, device_base));
}

std::unique_ptr<DeviceModelWeights> upload_model_weights(const ModelWeights& weights) {
    auto d = std::make_unique<DeviceModelWeights>();
    const std::span<const std::byte> file = weights.dense_file->bytes();
    // Only what the model reads: an MTP head that was not loaded is not allocated either.
    std::vector<UploadedRange> plan = plan_upload(weights.resident_ranges);
    const uint64_t device_bytes =
        plan.empty() ? 0 : plan.back().device_offset + plan.back().n_bytes;
    d->dense = DeviceBuffer(device_bytes);
    for (const UploadedRange& range : plan) {
        CHERENKOV_ASSERT(range.host_offset + range.n_bytes <= file.size(),
                         "resident range past the end of dense.bin");
        d->dense.upload(file.data() + range.host_offset, range.n_bytes, range.device_offset);
    }
    const Translator t(file.data(), std::move(plan), d->dense.data());
    d->embed = linear(weights.embed, t);
    d->lm_head = linear(weights.lm_head, t);
    d->final_mixer = hyper_connection(weights.final_mixer, t);
    for (const LayerWeights& l : weights.layers) d->layers.push_back(layer(l, t));
    if (weights.mtp) {
        const MtpWeights& m = *weights.mtp;
        DeviceMtpWeights dm;
        dm.pre_fc_norm_embedding = t(m.pre_fc_norm_embedding, "mtp pre_fc_norm_embedding");
        dm.pre_fc_norm_hidden = t(m.pre_fc_norm_hidden, "mtp pre_fc_norm_hidden");
        dm.fc_embedding = linear(m.fc_embedding, t);
        dm.fc_hidden = linear(m.fc_hidden, t);
        for (const LayerWeights& l : m.layers) dm.layers.push_back(layer(l, t));
        dm.mixer = hyper_connection(m.mixer, t);
        dm.embed = linear(m.embed, t);
        dm.lm_head = linear(m.lm_head, t);
        d->mtp = std::move(dm);
    }
    attach_shared_experts(*d);
    return d;
}

}  // namespace cherenkov::engine::cuda
