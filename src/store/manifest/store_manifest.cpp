#include "store/manifest/store_manifest.h"

#include <limits>

#include "base/error.h"

namespace cherenkov::store {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object and reports "file: path.field: problem".
class FieldReader {
public:
    FieldReader(const json& object, std::string file_name, std::string path)
        : object_(object), file_name_(std::move(file_name)), path_(std::move(path)) {
        if (!object_.is_object()) fail("", "expected an object");
    }

    [[noreturn]] void fail(std::string_view field, std::string_view problem) const {
        std::string where = path_;
        if (!field.empty()) where += (where.empty() ? "" : ".") + std::string(field);
        throw_corrupt(file_name_ + ": " + (where.empty() ? "" : where + ": ") +
                      std::string(problem));
    }

    const json& member(std::string_view field) const {
        auto found = object_.find(std::string(field));
        if (found == object_.end()) fail(field, "missing");
        return *found;
    }

    bool has(std::string_view field) const { return object_.contains(std::string(field)); }

    uint64_t u64(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_number_unsigned() &&
            !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
            fail(field, "expected a non-negative integer");
        }
        return value.get<uint64_t>();
    }

    int64_t i64(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_number_integer()) fail(field, "expected an integer");
        return value.get<int64_t>();
    }

    int small_int(std::string_view field) const {
        int64_t value = i64(field);
        if (value < 0 || value > 4096) fail(field, "out of range");
        return static_cast<int>(value);
    }

    std::string text(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_string()) fail(field, "expected a string");
        return value.get<std::string>();
    }

    // An optional SHA-256 digest: 64 lowercase hex digits.
    std::optional<std::string> optional_sha256(std::string_view field) const {
        if (!has(field)) return std::nullopt;
        std::string value = text(field);
        if (value.size() != 64 ||
            value.find_first_not_of("0123456789abcdef") != std::string::npos) {
            fail(field, "expected 64 lowercase hex digits");
        }
        return value;
    }

    bool boolean(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_boolean()) fail(field, "expected a boolean");
        return value.get<bool>();
    }

    ByteRange range(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_array() || value.size() != 2 || !value[0].is_number_unsigned() ||
            !value[1].is_number_unsigned()) {
            fail(field, "expected [offset, n_bytes]");
        }
        ByteRange result{value[0].get<uint64_t>(), value[1].get<uint64_t>()};
        if (result.offset > std::numeric_limits<uint64_t>::max() - result.n_bytes) {
            fail(field, "range overflows");
        }
        return result;
    }

    std::vector<uint64_t> shape(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_array() || value.size() > 8) fail(field, "expected a shape array");
        std::vector<uint64_t> result;
        for (const json& dim : value) {
            if (!dim.is_number_unsigned()) fail(field, "expected non-negative integers");
            result.push_back(dim.get<uint64_t>());
        }
        return result;
    }

    FieldReader child(std::string_view field) const {
        return FieldReader(member(field), file_name_, join(field));
    }

    const json& array(std::string_view field) const {
        const json& value = member(field);
        if (!value.is_array()) fail(field, "expected an array");
        return value;
    }

    FieldReader element(std::string_view field, size_t index, const json& value) const {
        return FieldReader(value, file_name_, join(field) + "[" + std::to_string(index) + "]");
    }

    const std::string& file_name() const { return file_name_; }

private:
    std::string join(std::string_view field) const {
        return path_.empty() ? std::string(field) : path_ + "." + std::string(field);
    }

    const json& object_;
    std::string file_name_;
    std::string path_;
};

json range_json(const ByteRange& range) {
    return json::array({range.offset, range.n_bytes});
}

json projection_json(const ProjectionLayout& projection) {
    return {{"rows", projection.rows},
            {"cols", projection.cols},
            {"codes", range_json(projection.codes)},
            {"scales", range_json(projection.scales)},
            {"biases", range_json(projection.biases)}};
}

json experts_json(const ExpertLayout& layout) {
    return {{"bits", layout.bits},
            {"group_size", layout.group_size},
            {"hidden", layout.hidden},
            {"intermediate", layout.intermediate},
            {"n_trunk_layers", layout.n_trunk_layers},
            {"n_mtp_layers", layout.n_mtp_layers},
            {"n_experts", layout.n_experts},
            {"record_bytes", layout.record_bytes},
            {"record_align", kRecordAlign},
            {"record_index", "layer * n_experts + expert; MTP layers follow the trunk layers"},
            {"gate", projection_json(layout.gate)},
            {"up", projection_json(layout.up)},
            {"down", projection_json(layout.down)}};
}

ProjectionLayout parse_projection(const FieldReader& reader) {
    ProjectionLayout projection;
    projection.rows = reader.u64("rows");
    projection.cols = reader.u64("cols");
    projection.codes = reader.range("codes");
    projection.scales = reader.range("scales");
    projection.biases = reader.range("biases");
    return projection;
}

// Parses the expert layout and checks it equals the layout this version computes for its
// parameters: the record math is the format, the offsets are there for readers in other tools.
ExpertLayout parse_experts(const FieldReader& reader) {
    const int bits = reader.small_int("bits");
    const int group_size = reader.small_int("group_size");
    const uint64_t hidden = reader.u64("hidden");
    const uint64_t intermediate = reader.u64("intermediate");
    const int64_t n_trunk = reader.i64("n_trunk_layers");
    const int64_t n_mtp = reader.i64("n_mtp_layers");
    const int64_t n_experts = reader.i64("n_experts");
    if (hidden > (1u << 20) || intermediate > (1u << 20) || n_trunk < 0 || n_trunk > 4096 ||
        n_mtp < 0 || n_mtp > 64 || n_experts <= 0 || n_experts > 65536) {
        reader.fail("", "expert table dimensions out of range");
    }
    ExpertLayout expected;
    try {
        expected =
            make_expert_layout(hidden, intermediate, bits, group_size, n_trunk, n_mtp, n_experts);
    } catch (const Error& error) {
        reader.fail("", error.what());
    }
    ExpertLayout parsed = expected;
    parsed.record_bytes = reader.u64("record_bytes");
    parsed.gate = parse_projection(reader.child("gate"));
    parsed.up = parse_projection(reader.child("up"));
    parsed.down = parse_projection(reader.child("down"));
    if (!(parsed == expected)) {
        reader.fail("", "record layout does not match the layout of bits " + std::to_string(bits) +
                            ", group " + std::to_string(group_size) + ", hidden " +
                            std::to_string(hidden) + ", intermediate " +
                            std::to_string(intermediate));
    }
    return parsed;
}

void check_header(const FieldReader& reader, std::string_view format) {
    if (reader.text("format") != format) {
        reader.fail("format", "expected \"" + std::string(format) + "\"");
    }
    if (reader.i64("version") != kStoreVersion) {
        reader.fail("version", "unsupported store version (this build reads " +
                                   std::to_string(kStoreVersion) + ")");
    }
}

json parse_json(std::string_view text, const std::string& file_name) {
    json document = json::parse(text, nullptr, false);
    if (document.is_discarded()) throw_corrupt(file_name + ": not valid JSON");
    return document;
}

DenseEncoding parse_encoding(const FieldReader& reader) {
    std::string name = reader.text("encoding");
    if (name == "affine") return DenseEncoding::Affine;
    if (name == "f32") return DenseEncoding::F32;
    if (name == "i64") return DenseEncoding::I64;
    reader.fail("encoding", "unknown encoding \"" + name + "\"");
}

DenseTensor parse_dense(const FieldReader& reader, uint64_t dense_bytes) {
    DenseTensor tensor;
    tensor.name = reader.text("name");
    tensor.encoding = parse_encoding(reader);
    tensor.shape = reader.shape("shape");
    tensor.data = reader.range("data");
    uint64_t n_elements = 1;
    for (uint64_t dim : tensor.shape) {
        if (dim != 0 && n_elements > std::numeric_limits<uint64_t>::max() / 16 / dim) {
            reader.fail("shape", "too many elements");
        }
        n_elements *= dim;
    }
    uint64_t expected_data = 0;
    if (tensor.encoding == DenseEncoding::Affine) {
        tensor.bits = reader.small_int("bits");
        tensor.group_size = reader.small_int("group_size");
        tensor.scales = reader.range("scales");
        tensor.biases = reader.range("biases");
        if (tensor.shape.size() != 2 || tensor.group_size == 0 ||
            tensor.shape[1] % static_cast<uint64_t>(tensor.group_size) != 0 ||
            (tensor.bits != 2 && tensor.bits != 3 && tensor.bits != 4 && tensor.bits != 5 &&
             tensor.bits != 6 && tensor.bits != 8)) {
            reader.fail("", "bad affine parameters for tensor '" + tensor.name + "'");
        }
        expected_data = affine_code_bytes(tensor.shape[0], tensor.shape[1], tensor.bits);
        const uint64_t scale_bytes =
            affine_scale_bytes(tensor.shape[0], tensor.shape[1], tensor.group_size);
        if (tensor.scales.n_bytes != scale_bytes || tensor.biases.n_bytes != scale_bytes) {
            reader.fail("scales", "size does not match the shape of '" + tensor.name + "'");
        }
        if (tensor.scales.end() > dense_bytes || tensor.biases.end() > dense_bytes) {
            reader.fail("scales", "'" + tensor.name + "' lies past the end of dense.bin");
        }
    } else {
        expected_data = n_elements * (tensor.encoding == DenseEncoding::F32 ? 4 : 8);
    }
    if (tensor.data.n_bytes != expected_data) {
        reader.fail("data", "size " + std::to_string(tensor.data.n_bytes) +
                                " does not match the shape of '" + tensor.name + "' (" +
                                std::to_string(expected_data) + ")");
    }
    if (tensor.data.end() > dense_bytes) {
        reader.fail("data", "'" + tensor.name + "' lies past the end of dense.bin");
    }
    return tensor;
}

NgramTable parse_ngram(const FieldReader& reader, uint64_t ngram_bytes) {
    NgramTable table;
    table.layer = reader.i64("layer");
    table.rows = reader.u64("rows");
    table.width = reader.u64("width");
    table.bits = reader.small_int("bits");
    table.group_size = reader.small_int("group_size");
    table.row_bytes = reader.u64("row_bytes");
    table.range = reader.range("range");
    if (table.bits != 4 || table.group_size != 32 || table.width % 32 != 0 || table.width == 0) {
        reader.fail("", "n-gram tables are 4-bit group 32 with a width that is a multiple of 32");
    }
    if (table.width > (1u << 20) || table.rows > (uint64_t{1} << 40))
        reader.fail("", "table too large");
    const uint64_t row_bytes =
        affine_code_bytes(1, table.width, 4) + 2 * affine_scale_bytes(1, table.width, 32);
    if (table.row_bytes != row_bytes || table.range.n_bytes != row_bytes * table.rows) {
        reader.fail("row_bytes", "does not match width and rows");
    }
    if (table.range.end() > ngram_bytes) reader.fail("range", "lies past the end of ngram.bin");
    return table;
}

}  // namespace

std::string_view dense_encoding_name(DenseEncoding encoding) {
    switch (encoding) {
        case DenseEncoding::Affine: return "affine";
        case DenseEncoding::F32: return "f32";
        case DenseEncoding::I64: return "i64";
    }
    return "unknown";
}

std::string lowbit_manifest_name(int bits) {
    return "manifest" + std::to_string(bits) + ".json";
}
std::string lowbit_experts_name(int bits) {
    return "experts" + std::to_string(bits) + ".bin";
}

const DenseTensor* StoreManifest::find_dense(std::string_view name) const {
    for (const DenseTensor& tensor : dense) {
        if (tensor.name == name) return &tensor;
    }
    return nullptr;
}

nlohmann::json manifest_to_json(const StoreManifest& manifest) {
    json files = json::array();
    for (const SourceFile& file : manifest.source.files) {
        json entry = {
            {"name", file.name}, {"size_bytes", file.size_bytes}, {"mtime_ns", file.mtime_ns}};
        if (file.sha256) entry["sha256"] = *file.sha256;
        if (file.header_sha256) entry["header_sha256"] = *file.header_sha256;
        files.push_back(std::move(entry));
    }
    json dense = json::array();
    for (const DenseTensor& tensor : manifest.dense) {
        json entry = {{"name", tensor.name},
                      {"encoding", dense_encoding_name(tensor.encoding)},
                      {"shape", tensor.shape},
                      {"data", range_json(tensor.data)}};
        if (tensor.encoding == DenseEncoding::Affine) {
            entry["bits"] = tensor.bits;
            entry["group_size"] = tensor.group_size;
            entry["scales"] = range_json(tensor.scales);
            entry["biases"] = range_json(tensor.biases);
        }
        dense.push_back(std::move(entry));
    }
    json ngram = json::array();
    for (const NgramTable& table : manifest.ngram) {
        ngram.push_back({{"layer", table.layer},
                         {"rows", table.rows},
                         {"width", table.width},
                         {"bits", table.bits},
                         {"group_size", table.group_size},
                         {"row_bytes", table.row_bytes},
                         {"range", range_json(table.range)}});
    }
    return {{"format", kStoreFormat},
            {"version", manifest.version},
            {"source",
             {{"path", manifest.source.path},
              {"kind", manifest.source.kind},
              {"norm_convention", manifest.source.norm_convention},
              {"files", files}}},
            {"norms_folded", manifest.norms_folded},
            {"has_mtp", manifest.has_mtp},
            {"files",
             {{"dense.bin", manifest.dense_bytes},
              {"ngram.bin", manifest.ngram_bytes},
              {"experts.bin", manifest.experts_bytes}}},
            {"experts", experts_json(manifest.experts)},
            {"dense", dense},
            {"ngram", ngram}};
}

nlohmann::json lowbit_manifest_to_json(const LowBitManifest& manifest) {
    return {{"format", kLowBitFormat},
            {"version", manifest.version},
            {"bits", manifest.bits},
            {"experts_file", manifest.experts_file},
            {"base_experts_bytes", manifest.base_experts_bytes},
            {"experts_bytes", manifest.experts_bytes},
            {"experts", experts_json(manifest.experts)}};
}

StoreManifest parse_store_manifest(std::string_view text, const std::string& file_name) {
    const json document = parse_json(text, file_name);
    const FieldReader root(document, file_name, "");
    check_header(root, kStoreFormat);
    StoreManifest manifest;
    const FieldReader source = root.child("source");
    manifest.source.path = source.text("path");
    manifest.source.kind = source.text("kind");
    if (manifest.source.kind != "hf-bf16" && manifest.source.kind != "mlx-affine") {
        source.fail("kind", "expected \"hf-bf16\" or \"mlx-affine\"");
    }
    manifest.source.norm_convention = source.text("norm_convention");
    const json& files = source.array("files");
    for (size_t index = 0; index < files.size(); ++index) {
        const FieldReader file = source.element("files", index, files[index]);
        SourceFile entry;
        entry.name = file.text("name");
        entry.size_bytes = file.u64("size_bytes");
        entry.mtime_ns = file.i64("mtime_ns");
        entry.sha256 = file.optional_sha256("sha256");
        entry.header_sha256 = file.optional_sha256("header_sha256");
        manifest.source.files.push_back(std::move(entry));
    }
    manifest.norms_folded = root.boolean("norms_folded");
    manifest.has_mtp = root.boolean("has_mtp");
    const FieldReader sizes = root.child("files");
    manifest.dense_bytes = sizes.u64(kDenseName);
    manifest.ngram_bytes = sizes.u64(kNgramName);
    manifest.experts_bytes = sizes.u64(kExpertsName);
    manifest.experts = parse_experts(root.child("experts"));
    if (manifest.experts.file_bytes() != manifest.experts_bytes) {
        root.fail("files.experts.bin", "size does not equal records × record_bytes (" +
                                           std::to_string(manifest.experts.file_bytes()) + ")");
    }
    if (manifest.has_mtp != (manifest.experts.n_mtp_layers > 0)) {
        root.fail("has_mtp", "disagrees with experts.n_mtp_layers");
    }
    const json& dense = root.array("dense");
    for (size_t index = 0; index < dense.size(); ++index) {
        manifest.dense.push_back(
            parse_dense(root.element("dense", index, dense[index]), manifest.dense_bytes));
    }
    const json& ngram = root.array("ngram");
    for (size_t index = 0; index < ngram.size(); ++index) {
        manifest.ngram.push_back(
            parse_ngram(root.element("ngram", index, ngram[index]), manifest.ngram_bytes));
    }
    return manifest;
}

LowBitManifest parse_lowbit_manifest(std::string_view text, const std::string& file_name) {
    const json document = parse_json(text, file_name);
    const FieldReader root(document, file_name, "");
    check_header(root, kLowBitFormat);
    LowBitManifest manifest;
    manifest.bits = root.small_int("bits");
    if (manifest.bits != 2 && manifest.bits != 3) root.fail("bits", "expected 2 or 3");
    manifest.experts_file = root.text("experts_file");
    if (manifest.experts_file != lowbit_experts_name(manifest.bits)) {
        root.fail("experts_file", "expected \"" + lowbit_experts_name(manifest.bits) + "\"");
    }
    manifest.base_experts_bytes = root.u64("base_experts_bytes");
    manifest.experts_bytes = root.u64("experts_bytes");
    manifest.experts = parse_experts(root.child("experts"));
    if (manifest.experts.bits != manifest.bits) root.fail("experts.bits", "disagrees with bits");
    if (manifest.experts.file_bytes() != manifest.experts_bytes) {
        root.fail("experts_bytes", "does not equal records × record_bytes");
    }
    return manifest;
}

}  // namespace cherenkov::store
