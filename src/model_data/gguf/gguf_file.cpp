// Parses a GGUF header (docs/formats.md §4) through a chunked reader and checks every count,
// length and tensor range against the file size before trusting it.
#include "model_data/gguf/gguf_file.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <unordered_set>

#include "base/error.h"

namespace cherenkov::model_data::gguf {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kMaxTensorNameBytes = 63;  // ggml rejects names of GGML_MAX_NAME (64) or more
constexpr int kMaxArrayDepth = 16;  // ggml itself rejects nested arrays; we read a few levels
// Header reads start at 64 KiB and double up to 4 MiB: small headers cost one read, a 20 MiB
// vocabulary about ten (each read is one HTTP range request on a remote source).
constexpr size_t kFirstChunkBytes = size_t{64} * 1024;
constexpr size_t kMaxChunkBytes = size_t{4} * 1024 * 1024;
// Real headers (a 256k-token vocabulary with merges) take tens of MiB. The ceiling keeps a
// corrupt length in a huge file from allocating or fetching gigabytes.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxKeyBytes = 65535;  // spec: keys are at most 65535 bytes

// Smallest encoding of one item, used to bound untrusted counts by the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims 0, type, offset
constexpr uint64_t kMinStringBytes = 8;                  // length only
constexpr uint64_t kMinArrayBytes = 4 + 8;               // element type + count

std::string quoted(std::string_view text) {
    // Names come from the file; keep messages on one line and bounded.
    std::string out = "'";
    const size_t shown = std::min<size_t>(text.size(), 80);
    for (size_t index = 0; index < shown; ++index) {
        const auto byte = static_cast<unsigned char>(text[index]);
        if (byte < 0x20 || byte == 0x7F) {
            out += '?';
        } else {
            out += static_cast<char>(byte);
        }
    }
    if (shown < text.size()) out += "...";
    out += "'";
    return out;
}

// Sequential little-endian reads over a ByteSource, fetched in growing chunks so that the
// header costs a few large reads rather than one per field. Every failure names the
// source, the field and the byte offset.
class HeaderReader {
public:
    explicit HeaderReader(const ByteSource& source)
        : source_(source), size_(source.size()), limit_(std::min(size_, kMaxHeaderBytes)) {}

    uint64_t offset() const { return offset_; }
    // Bytes the header may still use: to the end of the file or the header ceiling.
    uint64_t remaining() const { return limit_ - offset_; }
    const std::string& name() const { return source_.name(); }

    [[noreturn]] void fail_corrupt(const std::string& field, uint64_t at,
                                   const std::string& problem) const {
        throw_corrupt(name() + ": GGUF " + field + " at byte " + std::to_string(at) + ": " +
                      problem);
    }

    // Throws Corrupt unless `n_bytes` more bytes are left for `field`.
    void require(uint64_t n_bytes, const std::string& field) const {
        if (n_bytes <= remaining()) return;
        if (limit_ < size_ && n_bytes <= size_ - offset_) {
            throw_unsupported(name() + ": GGUF " + field + " at byte " + std::to_string(offset_) +
                              ": the header would exceed the reader's limit of " +
                              std::to_string(kMaxHeaderBytes) + " bytes");
        }
        fail_corrupt(field, offset_,
                     "needs " + std::to_string(n_bytes) + " bytes but only " +
                         std::to_string(size_ - offset_) + " remain (file has " +
                         std::to_string(size_) + " bytes; truncated?)");
    }

    void read_bytes(std::span<std::byte> out, const std::string& field) {
        require(out.size(), field);
        size_t done = 0;
        while (done < out.size()) {
            if (buffer_pos_ == buffer_.size()) {
                if (out.size() - done >= chunk_bytes_) {
                    // Large payloads (long arrays) go straight to the caller's memory.
                    source_.read(offset_, out.subspan(done));
                    offset_ += out.size() - done;
                    return;
                }
                refill();
            }
            const size_t n_copy = std::min(out.size() - done, buffer_.size() - buffer_pos_);
            std::copy_n(buffer_.begin() + static_cast<std::ptrdiff_t>(buffer_pos_), n_copy,
                        out.begin() + static_cast<std::ptrdiff_t>(done));
            buffer_pos_ += n_copy;
            offset_ += n_copy;
            done += n_copy;
        }
    }

    uint64_t read_uint(uint32_t width, const std::string& field) {
        std::byte bytes[8];
        read_bytes(std::span<std::byte>(bytes, width), field);
        uint64_t value = 0;
        for (uint32_t index = 0; index < width; ++index) {
            value |= static_cast<uint64_t>(bytes[index]) << (8 * index);
        }
        return value;
    }

    uint32_t read_u32(const std::string& field) {
        return static_cast<uint32_t>(read_uint(4, field));
    }
    uint64_t read_u64(const std::string& field) { return read_uint(8, field); }

    // gguf_string: u64 length, then that many bytes. `max_bytes` bounds the length further.
    std::string read_string(const std::string& field,
                            uint64_t max_bytes = std::numeric_limits<uint64_t>::max()) {
        const uint64_t at = offset_;
        const uint64_t length = read_u64(field + " length");
        if (length > max_bytes) {
            fail_corrupt(field, at,
                         "length " + std::to_string(length) + " exceeds the limit of " +
                             std::to_string(max_bytes) + " bytes");
        }
        require(length, field);
        std::string text(length, '\0');
        read_bytes(std::as_writable_bytes(std::span<char>(text.data(), text.size())), field);
        return text;
    }

private:
    void refill() {
        // Called only when the buffer is used up; require() has checked there is more.
        const uint64_t n_bytes = std::min<uint64_t>(chunk_bytes_, remaining());
        buffer_.resize(n_bytes);
        source_.read(offset_, buffer_);
        buffer_pos_ = 0;
        chunk_bytes_ = std::min(chunk_bytes_ * 2, kMaxChunkBytes);
    }

    const ByteSource& source_;
    uint64_t size_;
    uint64_t limit_;                 // min(size_, kMaxHeaderBytes)
    uint64_t offset_ = 0;            // file offset of the next unread byte
    std::vector<std::byte> buffer_;  // bytes [offset_ - buffer_pos_, ...) of the file
    size_t buffer_pos_ = 0;
    size_t chunk_bytes_ = kFirstChunkBytes;  // size of the next refill
};

uint64_t min_value_bytes(GgufValueType type) {
    if (type == GgufValueType::String) return kMinStringBytes;
    if (type == GgufValueType::Array) return kMinArrayBytes;
    return gguf_value_type_width(type);
}

GgufValueType read_value_type(HeaderReader& reader, const std::string& field) {
    const uint64_t at = reader.offset();
    const uint32_t id = reader.read_u32(field);
    const auto type = gguf_value_type_from_id(id);
    if (!type) {
        reader.fail_corrupt(field, at,
                            "unknown value type " + std::to_string(id) + " (0..12 exist)");
    }
    return *type;
}

GgufValue read_value(HeaderReader& reader, GgufValueType type, const std::string& field, int depth);

GgufValue read_array(HeaderReader& reader, const std::string& field, int depth) {
    const uint64_t at = reader.offset();
    if (depth >= kMaxArrayDepth) {
        throw_unsupported(reader.name() + ": GGUF " + field + " at byte " + std::to_string(at) +
                          ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) +
                          " levels");
    }
    const GgufValueType element_type = read_value_type(reader, field + " element type");
    const uint64_t count_at = reader.offset();
    const uint64_t count = reader.read_u64(field + " element count");
    const uint64_t min_bytes = min_value_bytes(element_type);
    if (count > reader.remaining() / min_bytes) {
        reader.fail_corrupt(
            field + " element count", count_at,
            std::to_string(count) + " " + std::string(gguf_value_type_name(element_type)) +
                " elements need at least " + std::to_string(min_bytes) + " bytes each, but only " +
                std::to_string(reader.remaining()) + " bytes remain");
    }
    if (element_type == GgufValueType::String) {
        std::vector<std::string> strings;
        strings.reserve(count);
        for (uint64_t index = 0; index < count; ++index) {
            strings.push_back(reader.read_string(field + "[" + std::to_string(index) + "]"));
        }
        return GgufValue::string_array(std::move(strings));
    }
    if (element_type == GgufValueType::Array) {
        std::vector<GgufValue> arrays;
        arrays.reserve(count);
        for (uint64_t index = 0; index < count; ++index) {
            arrays.push_back(
                read_array(reader, field + "[" + std::to_string(index) + "]", depth + 1));
        }
        return GgufValue::nested_array(std::move(arrays));
    }
    const uint64_t data_at = reader.offset();
    std::vector<std::byte> raw(count * min_bytes);
    reader.read_bytes(raw, field + " elements");
    if (element_type == GgufValueType::Bool) {
        for (size_t index = 0; index < raw.size(); ++index) {
            const auto byte = static_cast<unsigned>(raw[index]);
            if (byte > 1) {
                reader.fail_corrupt(field + "[" + std::to_string(index) + "]", data_at + index,
                                    "bool byte is " + std::to_string(byte) + ", not 0 or 1");
            }
        }
    }
    return GgufValue::scalar_array(element_type, std::move(raw));
}

GgufValue read_value(HeaderReader& reader, GgufValueType type, const std::string& field,
                     int depth) {
    const uint64_t at = reader.offset();
    switch (type) {
        case GgufValueType::Uint8:
        case GgufValueType::Uint16:
        case GgufValueType::Uint32:
        case GgufValueType::Uint64:
        case GgufValueType::Int8:
        case GgufValueType::Int16:
        case GgufValueType::Int32:
        case GgufValueType::Int64:
        case GgufValueType::Float32:
        case GgufValueType::Float64:
            return GgufValue::from_bits(type, reader.read_uint(gguf_value_type_width(type), field));
        case GgufValueType::Bool: {
            const uint64_t byte = reader.read_uint(1, field);
            if (byte > 1) {
                reader.fail_corrupt(field, at,
                                    "bool byte is " + std::to_string(byte) + ", not 0 or 1");
            }
            return GgufValue::boolean(byte == 1);
        }
        case GgufValueType::String: return GgufValue::string(reader.read_string(field));
        case GgufValueType::Array: return read_array(reader, field, depth);
    }
    throw_internal("unhandled GGUF value type");
}

void read_preamble(HeaderReader& reader, GgufFile& file) {
    if (file.file_size < 4) {
        throw_corrupt(file.path + ": not a GGUF file: " + std::to_string(file.file_size) +
                      " bytes, too short for the magic");
    }
    std::byte magic[4];
    reader.read_bytes(magic, "magic");
    if (magic[0] != std::byte{'G'} || magic[1] != std::byte{'G'} || magic[2] != std::byte{'U'} ||
        magic[3] != std::byte{'F'}) {
        char shown[16];
        std::snprintf(shown, sizeof(shown), "%02x %02x %02x %02x", static_cast<unsigned>(magic[0]),
                      static_cast<unsigned>(magic[1]), static_cast<unsigned>(magic[2]),
                      static_cast<unsigned>(magic[3]));
        throw_corrupt(file.path + ": not a GGUF file: magic at byte 0 is " + shown +
                      ", expected 47 47 55 46 (\"GGUF\")");
    }
    file.version = reader.read_u32("version");
    if (file.version != 0 && (file.version & 0xFFFF) == 0) {
        throw_unsupported(file.path + ": GGUF version at byte 4 reads " +
                          std::to_string(file.version) +
                          ": the file is byte-swapped (big-endian), which is not supported");
    }
    if (file.version == 0) {
        throw_corrupt(file.path + ": GGUF version at byte 4 is 0, which is invalid");
    }
    if (file.version == 1) {
        throw_unsupported(file.path +
                          ": GGUF version at byte 4 is 1, which is not supported (only 2 and 3)");
    }
    if (file.version != 2 && file.version != 3) {
        throw_unsupported(file.path + ": GGUF version at byte 4 is " +
                          std::to_string(file.version) + "; only versions 2 and 3 are supported");
    }
}

void read_metadata(HeaderReader& reader, uint64_t n_kv, GgufFile& file) {
    std::unordered_set<std::string> keys;
    for (uint64_t index = 0; index < n_kv; ++index) {
        const std::string entry_field = "metadata[" + std::to_string(index) + "]";
        const uint64_t key_at = reader.offset();
        std::string key = reader.read_string(entry_field + " key", kMaxKeyBytes);
        const std::string field = "metadata " + quoted(key);
        if (!keys.insert(key).second) reader.fail_corrupt(field, key_at, "duplicate key");
        const GgufValueType type = read_value_type(reader, field + " value type");
        GgufValue value = read_value(reader, type, field, 0);
        file.metadata.push_back({std::move(key), std::move(value)});
    }
}

uint32_t alignment_of(const GgufFile& file) {
    const GgufValue* value = file.find("general.alignment");
    if (value == nullptr) return kDefaultAlignment;
    if (value->type() != GgufValueType::Uint32) {
        throw_corrupt(file.path + ": GGUF metadata 'general.alignment' has type " +
                      std::string(gguf_value_type_name(value->type())) + ", expected uint32");
    }
    const uint64_t alignment = value->as_unsigned();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        throw_corrupt(file.path + ": GGUF metadata 'general.alignment' is " +
                      std::to_string(alignment) + ", not a power of two");
    }
    return static_cast<uint32_t>(alignment);
}

// Multiplies, returning false on uint64 overflow.
bool checked_mul(uint64_t lhs, uint64_t rhs, uint64_t& out) {
    return !__builtin_mul_overflow(lhs, rhs, &out);
}

GgufTensorInfo read_tensor_info(HeaderReader& reader, const std::string& entry_field,
                                uint32_t alignment) {
    GgufTensorInfo info;
    info.name = reader.read_string(entry_field + " name", kMaxTensorNameBytes);
    const std::string field = "tensor " + quoted(info.name);

    const uint64_t dims_at = reader.offset();
    const uint32_t n_dims = reader.read_u32(field + " n_dims");
    if (n_dims > kMaxDims) {
        reader.fail_corrupt(field + " n_dims", dims_at,
                            std::to_string(n_dims) + " dimensions, at most 4 allowed");
    }
    std::vector<uint64_t> ne(n_dims);
    info.n_elements = 1;
    for (uint32_t dim = 0; dim < n_dims; ++dim) {
        const std::string dim_field = field + " ne[" + std::to_string(dim) + "]";
        const uint64_t dim_at = reader.offset();
        ne[dim] = reader.read_u64(dim_field);
        // ggml stores ne as int64_t; the element count must fit one too.
        if (ne[dim] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
            !checked_mul(info.n_elements, ne[dim], info.n_elements) ||
            info.n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            reader.fail_corrupt(
                dim_field, dim_at,
                "extent " + std::to_string(ne[dim]) + " makes the element count overflow int64");
        }
    }
    info.shape.assign(ne.rbegin(), ne.rend());

    const uint64_t type_at = reader.offset();
    const uint32_t type_id = reader.read_u32(field + " type");
    const auto type = ggml_type_info(type_id);
    if (!type) {
        throw_unsupported(reader.name() + ": GGUF " + field + " type at byte " +
                          std::to_string(type_at) + ": unknown ggml type id " +
                          std::to_string(type_id) +
                          " (removed from ggml or newer than this reader)");
    }
    info.type = *type;
    const uint64_t row = n_dims > 0 ? ne[0] : 1;
    if (row % info.type.block_size != 0) {
        reader.fail_corrupt(field + " ne[0]", dims_at + 4,
                            "row length " + std::to_string(row) + " is not a multiple of " +
                                std::string(info.type.name) + "'s block size " +
                                std::to_string(info.type.block_size));
    }
    // n_elements / block_size blocks; exact because ne[0] is a multiple of the block size.
    if (!checked_mul(info.n_elements / info.type.block_size, info.type.type_size, info.n_bytes)) {
        reader.fail_corrupt(field, dims_at, "byte size overflows 64 bits");
    }

    const uint64_t offset_at = reader.offset();
    info.relative_offset = reader.read_u64(field + " offset");
    if (info.relative_offset % alignment != 0) {
        reader.fail_corrupt(field + " offset", offset_at,
                            "data offset " + std::to_string(info.relative_offset) +
                                " is not a multiple of the alignment " + std::to_string(alignment));
    }
    return info;
}

// Places every tensor in the file and checks the ranges lie inside it without overlapping.
void place_tensors(GgufFile& file) {
    for (GgufTensorInfo& tensor : file.tensors) {
        const std::string field = "GGUF tensor " + quoted(tensor.name);
        uint64_t end = 0;
        if (__builtin_add_overflow(file.data_offset, tensor.relative_offset, &tensor.file_offset) ||
            __builtin_add_overflow(tensor.file_offset, tensor.n_bytes, &end) ||
            end > file.file_size) {
            throw_corrupt(file.path + ": " + field + " data (" + std::to_string(tensor.n_bytes) +
                          " bytes at data offset " + std::to_string(tensor.relative_offset) +
                          ", data section starts at byte " + std::to_string(file.data_offset) +
                          ") runs past the end of the file (" + std::to_string(file.file_size) +
                          " bytes)");
        }
    }
    std::vector<const GgufTensorInfo*> by_offset;
    by_offset.reserve(file.tensors.size());
    for (const GgufTensorInfo& tensor : file.tensors) {
        if (tensor.n_bytes > 0) by_offset.push_back(&tensor);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto* lhs, const auto* rhs) { return lhs->file_offset < rhs->file_offset; });
    for (size_t index = 1; index < by_offset.size(); ++index) {
        const GgufTensorInfo& previous = *by_offset[index - 1];
        const GgufTensorInfo& current = *by_offset[index];
        if (current.file_offset < previous.file_offset + previous.n_bytes) {
            throw_corrupt(file.path + ": GGUF tensor " + quoted(current.name) + " data at byte " +
                          std::to_string(current.file_offset) + " overlaps tensor " +
                          quoted(previous.name) + " (bytes " +
                          std::to_string(previous.file_offset) + ".." +
                          std::to_string(previous.file_offset + previous.n_bytes) + ")");
        }
    }
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
    for (const GgufMetadataEntry& entry : metadata) {
        if (entry.key == key) return &entry.value;
    }
    return nullptr;
}

std::optional<std::string> GgufFile::architecture() const {
    const GgufValue* value = find("general.architecture");
    if (value == nullptr || value->type() != GgufValueType::String) return std::nullopt;
    return value->as_string();
}

GgufFile read_gguf(const ByteSource& source) {
    GgufFile file;
    file.path = source.name();
    file.file_size = source.size();
    HeaderReader reader(source);
    read_preamble(reader, file);

    const uint64_t n_tensors_at = reader.offset();
    const uint64_t n_tensors = reader.read_u64("tensor_count");
    const uint64_t n_kv_at = reader.offset();
    const uint64_t n_kv = reader.read_u64("metadata_kv_count");
    if (n_kv > reader.remaining() / kMinKvBytes) {
        reader.fail_corrupt("metadata_kv_count", n_kv_at,
                            std::to_string(n_kv) + " entries cannot fit in the " +
                                std::to_string(reader.remaining()) + " bytes left");
    }
    if (n_tensors > (reader.remaining() - n_kv * kMinKvBytes) / kMinTensorInfoBytes) {
        reader.fail_corrupt("tensor_count", n_tensors_at,
                            std::to_string(n_tensors) + " tensor infos cannot fit in the " +
                                std::to_string(reader.remaining()) + " bytes left");
    }

    file.metadata.reserve(n_kv);
    read_metadata(reader, n_kv, file);
    file.alignment = alignment_of(file);

    std::unordered_set<std::string> names;
    file.tensors.reserve(n_tensors);
    for (uint64_t index = 0; index < n_tensors; ++index) {
        const uint64_t at = reader.offset();
        GgufTensorInfo info =
            read_tensor_info(reader, "tensor_info[" + std::to_string(index) + "]", file.alignment);
        if (!names.insert(info.name).second) {
            reader.fail_corrupt("tensor_info[" + std::to_string(index) + "] name", at,
                                "duplicate tensor name " + quoted(info.name));
        }
        file.tensors.push_back(std::move(info));
    }

    file.header_bytes = reader.offset();
    // header_bytes <= file_size < 2^64 - alignment in any real file; checked anyway.
    if (__builtin_add_overflow(file.header_bytes, file.alignment - 1, &file.data_offset)) {
        reader.fail_corrupt("data section", file.header_bytes, "offset overflows 64 bits");
    }
    file.data_offset -= file.data_offset % file.alignment;
    place_tensors(file);
    return file;
}

}  // namespace cherenkov::model_data::gguf
