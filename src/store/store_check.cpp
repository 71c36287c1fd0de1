#include "store/store_check.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "base/half.h"
#include "model_data/qwen4_exp/config.h"
#include "store/packer/row_quantizer.h"

namespace cherenkov::store {

namespace {

namespace fs = std::filesystem;

uint64_t require_file_size(const std::string& path, uint64_t expected) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw_not_found(path + ": missing from the store");
    const uint64_t size = fs::file_size(path, ec);
    if (ec) throw_io(path + ": cannot read its size");
    if (size != expected) {
        throw_corrupt(path + ": " + std::to_string(size) + " bytes, the manifest says " +
                      std::to_string(expected) + (size < expected ? " (truncated)" : ""));
    }
    return size;
}

void check_bf16_finite(std::span<const std::byte> bytes, const std::string& what) {
    for (size_t offset = 0; offset + 1 < bytes.size(); offset += 2) {
        uint16_t bits = 0;
        std::memcpy(&bits, &bytes[offset], 2);
        if (!std::isfinite(bf16_to_float(bits))) {
            throw_corrupt(what + ": non-finite scale or bias at byte " + std::to_string(offset));
        }
    }
}

void check_projection(std::span<const std::byte> record, const ProjectionLayout& projection,
                      int bits, int group_size, const std::string& what) {
    auto codes = record.subspan(projection.codes.offset, projection.codes.n_bytes);
    auto scales = record.subspan(projection.scales.offset, projection.scales.n_bytes);
    auto biases = record.subspan(projection.biases.offset, projection.biases.n_bytes);
    check_bf16_finite(scales, what);
    check_bf16_finite(biases, what);
    const uint64_t rows = std::min<uint64_t>(projection.rows, 4);
    std::vector<float> values(rows * projection.cols);
    dequantize_rows(codes, scales, biases, rows, projection.cols, bits, group_size, values);
    for (float value : values) {
        if (!std::isfinite(value)) throw_corrupt(what + ": decodes to a non-finite value");
    }
}

void check_sample_records(const std::string& path, const ExpertLayout& layout) {
    if (layout.n_records() == 0) return;
    const UniqueFd fd = open_read_only(path);
    std::vector<std::byte> record(layout.record_bytes);
    const uint64_t samples[] = {0, layout.n_records() / 2, layout.n_records() - 1};
    for (uint64_t index : samples) {
        pread_exact(fd.get(), record, index * layout.record_bytes, path);
        check_record(record, layout, path + ": record " + std::to_string(index));
    }
}

// The store's config.json, parsed.
model_data::qwen4_exp::Config read_config(const std::string& directory) {
    const std::string path = directory + "/config.json";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw_not_found(path + ": missing from the store");
    return model_data::qwen4_exp::parse_config(read_text_file(path), path);
}

// config.json's dimensions against the manifest's expert layout.
void check_config(const std::string& directory, const StoreManifest& manifest,
                  const model_data::qwen4_exp::Config& config) {
    const std::string path = directory + "/config.json";
    const ExpertLayout& experts = manifest.experts;
    if (static_cast<uint64_t>(config.hidden_size) != experts.hidden ||
        static_cast<uint64_t>(config.moe_intermediate_size) != experts.intermediate ||
        config.num_experts != experts.n_experts ||
        config.num_hidden_layers != experts.n_trunk_layers) {
        throw_corrupt(path + ": model dimensions disagree with manifest.json experts");
    }
}

void check_dense_sample(const std::string& directory, const StoreManifest& manifest) {
    const std::string path = directory + "/" + std::string(kDenseName);
    const UniqueFd fd = open_read_only(path);
    std::vector<std::byte> bytes;
    for (const DenseTensor& tensor : manifest.dense) {
        if (tensor.encoding != DenseEncoding::Affine) continue;
        bytes.resize(std::min<uint64_t>(tensor.scales.n_bytes, 4096));
        pread_exact(fd.get(), bytes, tensor.scales.offset, path);
        check_bf16_finite(bytes, path + ": tensor '" + tensor.name + "' scales");
    }
}

}  // namespace

void check_record(std::span<const std::byte> record, const ExpertLayout& layout,
                  const std::string& what) {
    CHERENKOV_ASSERT(record.size() == layout.record_bytes, "record size");
    check_projection(record, layout.gate, layout.bits, layout.group_size, what + " gate");
    check_projection(record, layout.up, layout.bits, layout.group_size, what + " up");
    check_projection(record, layout.down, layout.bits, layout.group_size, what + " down");
}

bool looks_like_store(const std::string& directory) {
    std::error_code ec;
    return fs::is_regular_file(fs::path(directory) / kManifestName, ec);
}

StoreManifest validate_store(const std::string& directory) {
    return check_store(directory).manifest;
}

CheckedStore check_store(const std::string& directory,
                         const model_data::qwen4_exp::Config* config) {
    CheckedStore store;
    store.manifest = validate_store_files(directory);
    store.config = config != nullptr ? *config : read_config(directory);
    check_config(directory, store.manifest, store.config);
    return store;
}

void validate_store_config(const std::string& directory, const StoreManifest& manifest) {
    check_config(directory, manifest, read_config(directory));
}

StoreManifest validate_store_files(const std::string& directory) {
    const std::string manifest_path = directory + "/" + std::string(kManifestName);
    std::error_code ec;
    if (!fs::is_regular_file(manifest_path, ec))
        throw_not_found(manifest_path + ": not a store (no manifest.json)");
    StoreManifest manifest = parse_store_manifest(read_text_file(manifest_path), manifest_path);
    require_file_size(directory + "/" + std::string(kDenseName), manifest.dense_bytes);
    require_file_size(directory + "/" + std::string(kNgramName), manifest.ngram_bytes);
    require_file_size(directory + "/" + std::string(kExpertsName), manifest.experts_bytes);
    check_dense_sample(directory, manifest);
    check_sample_records(directory + "/" + std::string(kExpertsName), manifest.experts);
    return manifest;
}

LowBitManifest validate_lowbit_store(const std::string& directory, int bits,
                                     const StoreManifest& base) {
    const std::string manifest_path = directory + "/" + lowbit_manifest_name(bits);
    std::error_code ec;
    if (!fs::is_regular_file(manifest_path, ec)) throw_not_found(manifest_path + ": missing");
    LowBitManifest manifest = parse_lowbit_manifest(read_text_file(manifest_path), manifest_path);
    if (manifest.bits != bits)
        throw_corrupt(manifest_path + ": bits: expected " + std::to_string(bits));
    const ExpertLayout& experts = manifest.experts;
    if (manifest.base_experts_bytes != base.experts_bytes ||
        experts.hidden != base.experts.hidden ||
        experts.intermediate != base.experts.intermediate ||
        experts.n_experts != base.experts.n_experts ||
        experts.n_trunk_layers != base.experts.n_trunk_layers ||
        experts.n_mtp_layers != base.experts.n_mtp_layers) {
        throw_corrupt(manifest_path + ": was derived from a different base store");
    }
    const std::string experts_path = directory + "/" + manifest.experts_file;
    require_file_size(experts_path, manifest.experts_bytes);
    check_sample_records(experts_path, experts);
    return manifest;
}

}  // namespace cherenkov::store
