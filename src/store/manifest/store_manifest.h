// The store's manifest.json (and the low-bit manifest3.json / manifest2.json): what each file of
// a packed store holds and where (docs/store-format.md). Parsing validates every field and names
// the file and the JSON field in its errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/manifest/record_layout.h"

namespace cherenkov::store {

inline constexpr std::string_view kStoreFormat = "cherenkov-store";
inline constexpr std::string_view kLowBitFormat = "cherenkov-store-experts";
inline constexpr int kStoreVersion = 1;

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kDenseName = "dense.bin";
inline constexpr std::string_view kNgramName = "ngram.bin";
inline constexpr std::string_view kExpertsName = "experts.bin";

enum class DenseEncoding {
    Affine,  // MLX affine codes + BF16 scales + BF16 biases (bits / group_size)
    F32,     // float32, little-endian
    I64,     // int64 buffers, copied
};

std::string_view dense_encoding_name(DenseEncoding encoding);

// One tensor in dense.bin. `name` is the canonical name (trunk "model.", MTP "mtp.").
struct DenseTensor {
    std::string name;
    DenseEncoding encoding = DenseEncoding::F32;
    std::vector<uint64_t> shape;  // logical shape ([rows, cols] for Affine)
    int bits = 0;                 // Affine only
    int group_size = 0;           // Affine only
    ByteRange data;               // Affine: the codes; otherwise the values
    ByteRange scales;             // Affine only
    ByteRange biases;             // Affine only
};

// One PLE layer's n-gram table in ngram.bin: rows of [codes | BF16 scales | BF16 biases].
struct NgramTable {
    int64_t layer = 0;  // 0-based trunk layer
    uint64_t rows = 0;
    uint64_t width = 0;  // dh
    int bits = 4;
    int group_size = 32;
    uint64_t row_bytes = 0;
    ByteRange range;
};

struct SourceFile {
    std::string name;
    uint64_t size_bytes = 0;
    int64_t mtime_ns = 0;
    // Lowercase hex SHA-256. config.json and the shard index: of the whole file (`sha256`);
    // *.safetensors: of the 8-byte header length plus the JSON header (`header_sha256`). Both
    // absent in manifests written before hashes were recorded.
    std::optional<std::string> sha256;
    std::optional<std::string> header_sha256;
};

struct SourceIdentity {
    std::string path;
    std::string kind;             // "hf-bf16" or "mlx-affine"
    std::string norm_convention;  // of the source: zero_centred / folded / undetermined
    std::vector<SourceFile> files;
};

struct StoreManifest {
    int version = kStoreVersion;
    SourceIdentity source;
    bool norms_folded = true;  // the store always holds 1+w for zero-centred norms
    bool has_mtp = false;
    std::vector<DenseTensor> dense;
    std::vector<NgramTable> ngram;
    ExpertLayout experts;
    uint64_t dense_bytes = 0;
    uint64_t ngram_bytes = 0;
    uint64_t experts_bytes = 0;

    const DenseTensor* find_dense(std::string_view name) const;
};

// A derived low-bit expert table (experts3.bin / experts2.bin).
struct LowBitManifest {
    int version = kStoreVersion;
    int bits = 3;
    std::string experts_file;         // "experts3.bin"
    uint64_t base_experts_bytes = 0;  // size of the experts.bin it was derived from
    ExpertLayout experts;
    uint64_t experts_bytes = 0;
};

std::string lowbit_manifest_name(int bits);  // "manifest3.json"
std::string lowbit_experts_name(int bits);   // "experts3.bin"

nlohmann::json manifest_to_json(const StoreManifest& manifest);
nlohmann::json lowbit_manifest_to_json(const LowBitManifest& manifest);

// Throws Corrupt naming `file_name` and the field for malformed JSON, a wrong format marker,
// an unknown version, missing fields or inconsistent ranges.
StoreManifest parse_store_manifest(std::string_view text, const std::string& file_name);
LowBitManifest parse_lowbit_manifest(std::string_view text, const std::string& file_name);

}  // namespace cherenkov::store
