// Builds GGUF byte images for tests, field by field, so a test can write valid files and break
// exactly one field. Little-endian, as the format requires.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::model_data::gguf::testing {

using Bytes = std::vector<std::byte>;

template <int Width>
void append_le(Bytes& out, uint64_t value) {
    for (int index = 0; index < Width; ++index) {
        out.push_back(static_cast<std::byte>((value >> (8 * index)) & 0xFF));
    }
}

template <int Width>
Bytes le(uint64_t value) {
    Bytes out;
    append_le<Width>(out, value);
    return out;
}

inline Bytes u8(uint8_t value) {
    return le<1>(value);
}
inline Bytes u16(uint16_t value) {
    return le<2>(value);
}
inline Bytes u32(uint32_t value) {
    return le<4>(value);
}
inline Bytes u64(uint64_t value) {
    return le<8>(value);
}

inline Bytes f32(float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    return le<4>(bits);
}

inline Bytes f64(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, 8);
    return le<8>(bits);
}

// gguf_string: u64 length + bytes.
inline Bytes gstr(std::string_view text) {
    Bytes out = u64(text.size());
    for (char c : text) out.push_back(static_cast<std::byte>(c));
    return out;
}

inline Bytes cat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const Bytes& part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
}

// Array payload (after the ARRAY type id): element type, count, then the encoded elements.
inline Bytes array_payload(uint32_t element_type, uint64_t count, const Bytes& elements) {
    return cat({u32(element_type), u64(count), elements});
}

struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;  // ggml order: ne[0] innermost
    uint32_t type = 0;
    uint64_t offset = 0;  // relative to the data section
};

// A whole GGUF file: header, tensor infos, zero padding up to `alignment`, then `data`.
class GgufBuilder {
public:
    uint32_t version = 3;
    uint32_t alignment = 32;                // used for padding; set the KV separately
    std::optional<uint64_t> n_kv_override;  // write this count instead of the real one
    std::optional<uint64_t> n_tensors_override;
    Bytes data;  // the data section

    // `value` is the encoded value after the type id.
    GgufBuilder& kv(std::string_view key, uint32_t type, const Bytes& value) {
        kvs_.push_back(cat({gstr(key), u32(type), value}));
        return *this;
    }

    // Raw bytes in place of one KV entry, for malformed keys or types.
    GgufBuilder& raw_kv(const Bytes& bytes) {
        kvs_.push_back(bytes);
        return *this;
    }

    GgufBuilder& tensor(const TensorSpec& spec) {
        Bytes info = cat({gstr(spec.name), u32(static_cast<uint32_t>(spec.ne.size()))});
        for (uint64_t extent : spec.ne) append_le<8>(info, extent);
        info = cat({info, u32(spec.type), u64(spec.offset)});
        infos_.push_back(info);
        return *this;
    }

    GgufBuilder& raw_tensor_info(const Bytes& bytes) {
        infos_.push_back(bytes);
        return *this;
    }

    // Bytes before padding.
    Bytes header() const {
        Bytes out = {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}};
        append_le<4>(out, version);
        append_le<8>(out, n_tensors_override.value_or(infos_.size()));
        append_le<8>(out, n_kv_override.value_or(kvs_.size()));
        for (const Bytes& entry : kvs_) out.insert(out.end(), entry.begin(), entry.end());
        for (const Bytes& info : infos_) out.insert(out.end(), info.begin(), info.end());
        return out;
    }

    Bytes build() const {
        Bytes out = header();
        while (out.size() % alignment != 0) out.push_back(std::byte{0});
        out.insert(out.end(), data.begin(), data.end());
        return out;
    }

private:
    std::vector<Bytes> kvs_;
    std::vector<Bytes> infos_;
};

// Writes `bytes` to a file under the temp directory, unique to this process and `name`, and
// returns its path.
inline std::string write_temp_file(const std::string& name, const Bytes& bytes) {
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        ("cherenkov_gguf_test_" + std::to_string(::getpid()) + "_" + name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path.string();
}

}  // namespace cherenkov::model_data::gguf::testing
