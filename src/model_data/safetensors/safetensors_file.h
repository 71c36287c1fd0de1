// A safetensors container (docs/formats.md §1): strict header validation, tensor lookup,
// streaming byte reads through a ByteSource, and mapped views that keep their mapping alive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model_data/safetensors/dtype.h"
#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {

// The reference reader's bound on the JSON header length (docs/formats.md §1.1).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
    std::string name;
    Dtype dtype = Dtype::U8;
    std::vector<uint64_t> shape;
    uint64_t n_elements = 1;
    // Byte range relative to the start of the data section, end exclusive.
    uint64_t data_begin = 0;
    uint64_t data_end = 0;

    uint64_t n_bytes() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
    uint64_t header_bytes = 0;  // N, the JSON length
    uint64_t data_offset = 0;   // 8 + N: where the data section starts in the file
    uint64_t file_size = 0;
    std::vector<TensorInfo> tensors;  // sorted by data_begin
    std::map<std::string, std::string> metadata;
    std::unordered_map<std::string, size_t> index_by_name;  // into `tensors`

    const TensorInfo* find(std::string_view name) const;
    uint64_t file_begin(const TensorInfo& tensor) const { return data_offset + tensor.data_begin; }
    uint64_t file_end(const TensorInfo& tensor) const { return data_offset + tensor.data_end; }
};

// Validates and parses the JSON header of a file of `file_size` bytes whose header is
// `header_bytes` long (rules 1-5 of docs/formats.md §1.4). `file_name` prefixes every error.
SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t header_bytes,
                                           uint64_t file_size, const std::string& file_name);

// A tensor's bytes inside a mapping. Valid while `holder` lives; the file must stay unchanged.
struct TensorView {
    std::shared_ptr<const MappedFile> holder;
    const TensorInfo* info = nullptr;
    std::span<const std::byte> bytes;
};

class SafetensorsFile {
public:
    // Reads and validates only the 8-byte length and the header: on a remote source this costs
    // two range requests, whatever the file's size.
    static SafetensorsFile open(std::shared_ptr<const ByteSource> source);

    const std::string& name() const { return source_->name(); }
    const SafetensorsHeader& header() const { return header_; }
    const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
    const TensorInfo& tensor(std::string_view name) const;  // throws NotFound

    // Reads `out.size()` bytes of the tensor starting `offset_in_tensor` bytes into it.
    void read_tensor_bytes(const TensorInfo& tensor, uint64_t offset_in_tensor,
                           std::span<std::byte> out) const;
    std::vector<std::byte> read_tensor(const TensorInfo& tensor) const;

    // Maps the file (local sources only; throws Unsupported otherwise).
    TensorView map_tensor(const TensorInfo& tensor) const;

private:
    SafetensorsFile(std::shared_ptr<const ByteSource> source, SafetensorsHeader header)
        : source_(std::move(source)), header_(std::move(header)) {}

    std::shared_ptr<const ByteSource> source_;
    SafetensorsHeader header_;
};

}  // namespace cherenkov::model_data
