#include "engine/model/model_weights.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "engine/cpu/matmul.h"

namespace cherenkov::engine {
namespace {

namespace q4 = model_data::qwen4_exp;
using store::DenseEncoding;
using store::DenseTensor;

// Resolves canonical tensor names into views of the mapped dense.bin, checking shapes.
class Resolver {
public:
    Resolver(const ModelWeights& model, std::string dense_path)
        : model_(model), dense_path_(std::move(dense_path)) {}

    const DenseTensor& find(const std::string& name) const {
        const DenseTensor* tensor = model_.manifest.find_dense(name);
        if (tensor == nullptr) throw_corrupt(dense_path_ + ": tensor " + name + " is missing");
        return *tensor;
    }
    bool has(const std::string& name) const { return model_.manifest.find_dense(name) != nullptr; }
    // The dense.bin ranges of every view resolved so far.
    std::vector<store::ByteRange> take_used() { return std::move(used_); }

    Linear linear(const std::string& name, int64_t out, int64_t in) const {
        const DenseTensor& t = find(name + ".weight");
        check_shape(t, {static_cast<uint64_t>(out), static_cast<uint64_t>(in)});
        Linear l;
        if (t.encoding == DenseEncoding::Affine) {
            l.quantized = true;
            l.affine.rows = out;
            l.affine.cols = in;
            l.affine.bits = t.bits;
            l.affine.group_size = t.group_size;
            l.affine.codes = reinterpret_cast<const uint8_t*>(at(t.data));
            l.affine.scales = reinterpret_cast<const uint16_t*>(at(t.scales));
            l.affine.biases = reinterpret_cast<const uint16_t*>(at(t.biases));
        } else if (t.encoding == DenseEncoding::F32) {
            l.quantized = false;
            l.dense = F32Matrix{out, in, reinterpret_cast<const float*>(at(t.data))};
        } else {
            throw_corrupt(dense_path_ + ": tensor " + t.name + " has encoding " +
                          std::string(store::dense_encoding_name(t.encoding)) +
                          ", expected affine or f32");
        }
        if (has(name + ".bias")) l.bias = vector(name + ".bias", out);
        return l;
    }

    const float* vector(const std::string& name, int64_t n) const {
        const DenseTensor& t = find(name);
        require_f32(t);
        uint64_t count = 1;
        for (uint64_t d : t.shape) count *= d;
        if (count != static_cast<uint64_t>(n)) {
            throw_corrupt(dense_path_ + ": tensor " + name + " has " + std::to_string(count) +
                          " values, the config needs " + std::to_string(n));
        }
        return reinterpret_cast<const float*>(at(t.data));
    }

    // A float32 matrix [rows, cols]; conv weights may carry a middle axis of 1.
    const float* matrix(const std::string& name, int64_t rows, int64_t cols) const {
        return vector(name, rows * cols);
    }

    std::vector<int64_t> int64_buffer(const std::string& name) const {
        const DenseTensor* t = model_.manifest.find_dense(name);
        if (t == nullptr) return {};
        if (t->encoding != DenseEncoding::I64) {
            throw_corrupt(dense_path_ + ": tensor " + name + " is not int64");
        }
        std::vector<int64_t> values(t->data.n_bytes / sizeof(int64_t));
        std::memcpy(values.data(), at(t->data), values.size() * sizeof(int64_t));
        return values;
    }

private:
    const std::byte* at(const store::ByteRange& range) const {
        auto bytes = model_.dense_file->bytes();
        if (range.end() > bytes.size())
            throw_corrupt(dense_path_ + ": range past the end of the file");
        used_.push_back(range);
        return bytes.data() + range.offset;
    }
    void require_f32(const DenseTensor& t) const {
        if (t.encoding != DenseEncoding::F32) {
            throw_corrupt(dense_path_ + ": tensor " + t.name + " must be f32, found " +
                          std::string(store::dense_encoding_name(t.encoding)));
        }
    }
    void check_shape(const DenseTensor& t, const std::vector<uint64_t>& expected) const {
        if (t.shape != expected) {
            auto text = [](const std::vector<uint64_t>& s) {
                std::string out = "[";
                for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
                return out + "]";
            };
            throw_corrupt(dense_path_ + ": tensor " + t.name + " has shape " + text(t.shape) +
                          ", the config needs " + text(expected));
        }
    }

    const ModelWeights& model_;
    std::string dense_path_;
    // Every range at() handed out, in the order resolved (at() is const like the lookups).
    mutable std::vector<store::ByteRange> used_;
};

// `ranges` sorted by offset with overlapping and touching ranges merged.
std::vector<store::ByteRange> merge_ranges(std::vector<store::ByteRange> ranges) {
    std::sort(
        ranges.begin(), ranges.end(),
        [](const store::ByteRange& a, const store::ByteRange& b) { return a.offset < b.offset; });
    std::vector<store::ByteRange> merged;
    for (const store::ByteRange& range : ranges) {
        if (range.n_bytes == 0) continue;
        if (!merged.empty() && range.offset <= merged.back().end()) {
            const uint64_t end = std::max(merged.back().end(), range.end());
            merged.back().n_bytes = end - merged.back().offset;
            continue;
        }
        merged.push_back(range);
    }
    return merged;
}

HyperConnectionWeights load_hyper_connection(const Resolver& r, const std::string& prefix,
                                             const q4::Config& c, bool with_inject) {
    HyperConnectionWeights hc;
    const int64_t width = c.hc_width();
    hc.norm = r.vector(prefix + ".hc_norm.weight", width);
    hc.down = r.linear(prefix + ".input_mix_weight_down", c.hc_lowrank, width);
    hc.up = r.linear(prefix + ".input_mix_weight_up", width, c.hc_lowrank);
    if (with_inject) hc.inject = r.linear(prefix + ".block_inject_weight", c.hc_count, width);
    return hc;
}

SparseAttentionWeights load_sparse_attention(const Resolver& r, const std::string& p,
                                             const q4::Config& c) {
    SparseAttentionWeights a;
    const int64_t h = c.hidden_size;
    const int64_t d = c.head_dim;
    a.q = r.linear(p + ".q_proj", c.num_attention_heads * 2 * d, h);
    a.k = r.linear(p + ".k_proj", c.num_key_value_heads * d, h);
    a.v = r.linear(p + ".v_proj", c.num_key_value_heads * d, h);
    a.o = r.linear(p + ".o_proj", h, c.num_attention_heads * d);
    a.q_norm = r.vector(p + ".q_norm.weight", d);
    a.k_norm = r.vector(p + ".k_norm.weight", d);
    if (c.indexer) {
        const int64_t di = c.indexer->head_dim;
        a.has_indexer = true;
        a.index_qk = r.linear(p + ".indexer.index_qk_proj", (c.indexer->n_heads + 1) * di, h);
        a.index_q_norm = r.vector(p + ".indexer.q_layernorm.weight", di);
        a.index_k_norm = r.vector(p + ".indexer.k_layernorm.weight", di);
    }
    return a;
}

GatedDeltaNetWeights load_gated_deltanet(const Resolver& r, const std::string& p,
                                         const q4::Config& c) {
    GatedDeltaNetWeights g;
    const int64_t h = c.hidden_size;
    g.in_qkv = r.linear(p + ".in_proj_qkv", c.conv_dim, h);
    g.in_z = r.linear(p + ".in_proj_z", c.value_dim, h);
    g.in_b = r.linear(p + ".in_proj_b", c.linear_num_value_heads, h);
    g.in_a = r.linear(p + ".in_proj_a", c.linear_num_value_heads, h);
    g.out = r.linear(p + ".out_proj", h, c.value_dim);
    g.conv = r.matrix(p + ".conv1d.weight", c.conv_dim, c.linear_conv_kernel_dim);
    g.dt_bias = r.vector(p + ".dt_bias", c.linear_num_value_heads);
    g.a_log = r.vector(p + ".A_log", c.linear_num_value_heads);
    g.norm = r.vector(p + ".norm.weight", c.linear_value_head_dim);
    return g;
}

MoeWeights load_moe(const Resolver& r, const std::string& p, const q4::Config& c,
                    int64_t table_layer) {
    MoeWeights m;
    const int64_t h = c.hidden_size;
    m.router = r.linear(p + ".gate", c.num_experts, h);
    m.shared_gate = r.linear(p + ".shared_expert.gate_proj", c.shared_expert_intermediate_size, h);
    m.shared_up = r.linear(p + ".shared_expert.up_proj", c.shared_expert_intermediate_size, h);
    m.shared_down = r.linear(p + ".shared_expert.down_proj", h, c.shared_expert_intermediate_size);
    m.shared_expert_gate = r.linear(p + ".shared_expert_gate", 1, h);
    m.table_layer = table_layer;
    return m;
}

PleWeights load_ple(const Resolver& r, const ModelWeights& model, const std::string& p,
                    int64_t layer, const q4::NgramHash& computed) {
    const q4::Config& c = model.config;
    PleWeights w;
    const int64_t width = c.hc_width();
    w.key = r.linear(p + ".key_proj", width, c.ple_embed_dim);
    w.value = r.linear(p + ".value_proj", c.hidden_size, c.ple_embed_dim);
    w.norm_key = r.vector(p + ".norm_key.weight", width);
    w.norm_query = r.vector(p + ".norm_query.weight", width);
    w.norm_conv = r.vector(p + ".norm_conv.weight", width);
    w.conv = r.matrix(p + ".conv1d.weight", width, c.ple_conv_kernel_size);

    q4::HashBuffers buffers;
    buffers.layer_multipliers = r.int64_buffer(p + ".ple_embedding.layer_multipliers");
    buffers.head_vocab_sizes = r.int64_buffer(p + ".ple_embedding.ngram_heads_vocab_sizes");
    buffers.head_offsets = r.int64_buffer(p + ".ple_embedding.ngram_heads_offsets");
    w.hash = q4::adopt_checkpoint_buffers(computed, buffers, p);

    const store::NgramTable* table = nullptr;
    for (const store::NgramTable& t : model.manifest.ngram) {
        if (t.layer == layer) table = &t;
    }
    const std::string ngram_path = model.store_dir + "/ngram.bin";
    if (table == nullptr)
        throw_corrupt(ngram_path + ": no n-gram table for layer " + std::to_string(layer));
    if (static_cast<int64_t>(table->width) != c.ngram_head_dim) {
        throw_corrupt(ngram_path + ": layer " + std::to_string(layer) + " table width " +
                      std::to_string(table->width) + ", the config needs " +
                      std::to_string(c.ngram_head_dim));
    }
    if (static_cast<int64_t>(table->rows) < w.hash.total_rows) {
        throw_corrupt(ngram_path + ": layer " + std::to_string(layer) + " table has " +
                      std::to_string(table->rows) + " rows, hashing indexes " +
                      std::to_string(w.hash.total_rows));
    }
    if (table->range.end() > model.ngram_file->bytes().size()) {
        throw_corrupt(ngram_path + ": table of layer " + std::to_string(layer) +
                      " past the end of the file");
    }
    w.table =
        reinterpret_cast<const uint8_t*>(model.ngram_file->bytes().data() + table->range.offset);
    w.table_rows = table->rows;
    w.row_bytes = table->row_bytes;
    w.width = static_cast<int64_t>(table->width);
    w.group_size = table->group_size;
    w.bits = table->bits;
    return w;
}

LayerWeights load_layer(const Resolver& r, const ModelWeights& model, const std::string& p,
                        q4::LayerType type, int64_t table_layer, const q4::NgramHash* ple_hash,
                        int64_t trunk_layer) {
    const q4::Config& c = model.config;
    LayerWeights layer;
    layer.type = type;
    layer.attn_hc = load_hyper_connection(r, p + ".attn_hyper_connection", c, true);
    layer.mlp_hc = load_hyper_connection(r, p + ".mlp_hyper_connection", c, true);
    if (type == q4::LayerType::LinearAttention) {
        layer.gdn = load_gated_deltanet(r, p + ".linear_attn", c);
    } else {
        layer.qsa = load_sparse_attention(r, p + ".self_attn", c);
    }
    layer.moe = load_moe(r, p + ".mlp", c, table_layer);
    if (ple_hash != nullptr) layer.ple = load_ple(r, model, p + ".ple", trunk_layer, *ple_hash);
    return layer;
}

}  // namespace

void Linear::apply(const float* x, int64_t n_rows, float* y, ThreadPool* pool,
                   ActivationPrecision activations) const {
    const size_t in = static_cast<size_t>(in_features());
    const size_t out = static_cast<size_t>(out_features());
    if (quantized) {
        matmul(affine, x, in, n_rows, y, out, pool, activations);
    } else {
        matmul(dense, x, in, n_rows, y, out, pool);
    }
    if (bias != nullptr) {
        for (int64_t t = 0; t < n_rows; ++t) {
            for (size_t o = 0; o < out; ++o) y[t * out + o] += bias[o];
        }
    }
}

void Linear::row(int64_t index, float* out) const {
    if (quantized) {
        dequantize_row(affine, index, out);
    } else {
        std::memcpy(out, dense.data + index * dense.cols, sizeof(float) * dense.cols);
    }
}

void PleWeights::gather_row(int64_t row, float* out) const {
    if (row < 0 || static_cast<uint64_t>(row) >= table_rows) {
        throw_internal("n-gram row " + std::to_string(row) + " outside the table");
    }
    const uint8_t* base = table + static_cast<uint64_t>(row) * row_bytes;
    AffineMatrix m;
    m.rows = 1;
    m.cols = width;
    m.bits = bits;
    m.group_size = group_size;
    m.codes = base;
    const size_t code_bytes = static_cast<size_t>(width) * bits / 8;
    const size_t n_groups = static_cast<size_t>(width / group_size);
    m.scales = reinterpret_cast<const uint16_t*>(base + code_bytes);
    m.biases = reinterpret_cast<const uint16_t*>(base + code_bytes + 2 * n_groups);
    dequantize_row(m, 0, out);
}

uint64_t ModelWeights::resident_bytes() const {
    uint64_t total = 0;
    for (const store::ByteRange& range : resident_ranges) total += range.n_bytes;
    return total;
}

std::unique_ptr<ModelWeights> load_model_weights(const std::string& store_dir,
                                                 const WeightLoadOptions& options) {
    const std::string manifest_path = store_dir + "/manifest.json";
    const std::string config_path = store_dir + "/config.json";
    return load_model_weights(
        store_dir, store::parse_store_manifest(read_text_file(manifest_path), manifest_path),
        q4::parse_config(read_text_file(config_path), config_path), options);
}

std::unique_ptr<ModelWeights> load_model_weights(const std::string& store_dir,
                                                 store::StoreManifest manifest, q4::Config config,
                                                 const WeightLoadOptions& options) {
    auto model = std::make_unique<ModelWeights>();
    model->store_dir = store_dir;
    const std::string manifest_path = store_dir + "/manifest.json";
    model->manifest = std::move(manifest);
    model->config = std::move(config);
    const std::string dense_path = store_dir + "/dense.bin";
    model->dense_file = MappedFile::open(dense_path);
    if (model->dense_file->bytes().size() != model->manifest.dense_bytes) {
        throw_corrupt(dense_path + ": " + std::to_string(model->dense_file->bytes().size()) +
                      " bytes, manifest.json says " + std::to_string(model->manifest.dense_bytes));
    }
    const q4::Config& c = model->config;
    if (c.has_ple()) {
        model->ngram_file = MappedFile::open(store_dir + "/ngram.bin");
        if (model->ngram_file->bytes().size() != model->manifest.ngram_bytes) {
            throw_corrupt(store_dir + "/ngram.bin: size disagrees with manifest.json");
        }
    }
    const store::ExpertLayout& ex = model->manifest.experts;
    if (ex.n_experts != c.num_experts || static_cast<int64_t>(ex.hidden) != c.hidden_size ||
        static_cast<int64_t>(ex.intermediate) != c.moe_intermediate_size ||
        ex.n_trunk_layers != c.num_hidden_layers) {
        throw_corrupt(manifest_path + ": expert table shape disagrees with config.json");
    }

    Resolver r(*model, dense_path);
    const int64_t h = c.hidden_size;
    model->embed = r.linear("model.embed_tokens", c.vocab_size, h);
    model->lm_head = c.tie_word_embeddings && !r.has("lm_head.weight")
                         ? model->embed
                         : r.linear("lm_head", c.vocab_size, h);
    model->final_mixer = load_hyper_connection(r, "model.hyper_connection_mixer", c, false);

    std::vector<q4::NgramHash> hashes = q4::build_all_ngram_hashes(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const auto& ple_index = c.ple_layer_index[static_cast<size_t>(l)];
        const q4::NgramHash* hash = ple_index ? &hashes[static_cast<size_t>(*ple_index)] : nullptr;
        model->layers.push_back(load_layer(r, *model, "model.layers." + std::to_string(l),
                                           c.layer_types[static_cast<size_t>(l)], l, hash, l));
    }

    if (options.mtp && model->manifest.has_mtp && c.mtp_num_hidden_layers > 0) {
        MtpWeights mtp;
        const int64_t width = c.hc_width();
        mtp.pre_fc_norm_embedding = r.vector("mtp.pre_fc_norm_embedding.weight", h);
        mtp.pre_fc_norm_hidden = r.vector("mtp.pre_fc_norm_hidden.weight", width);
        mtp.fc_embedding = r.linear("mtp.fc_embedding", h, h);
        mtp.fc_hidden = r.linear("mtp.fc_hidden", h, h);
        if (ex.n_mtp_layers != c.mtp_num_hidden_layers) {
            throw_corrupt(manifest_path + ": expert table has " + std::to_string(ex.n_mtp_layers) +
                          " MTP layers, config.json says " +
                          std::to_string(c.mtp_num_hidden_layers));
        }
        for (int64_t i = 0; i < c.mtp_num_hidden_layers; ++i) {
            mtp.layers.push_back(load_layer(r, *model, "mtp.layers." + std::to_string(i),
                                            q4::LayerType::QwenSparseAttention,
                                            c.num_hidden_layers + i, nullptr, -1));
        }
        mtp.mixer = load_hyper_connection(r, "mtp.hyper_connection_mixer", c, false);
        if (c.mtp_use_dedicated_embeddings) {
            mtp.embed = r.linear("mtp.embed_tokens", c.vocab_size, h);
            mtp.lm_head = r.linear("mtp.shared_head.head", c.vocab_size, h);
        } else {
            mtp.embed = model->embed;
            mtp.lm_head = model->lm_head;
        }
        model->mtp = std::move(mtp);
    }
    model->resident_ranges = merge_ranges(r.take_used());
    return model;
}

}  // namespace cherenkov::engine
