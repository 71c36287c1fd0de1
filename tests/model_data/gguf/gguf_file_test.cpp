// read_gguf over GGUF images built field by field: every value type, arrays, alignment, v2,
// tensor layout, and malformed input that must fail with a message naming file and field.
#include "model_data/gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>

#include "base/error.h"
#include "model_data/gguf/ggml_type.h"
#include "model_data/gguf/gguf_builder.h"
#include "model_data/sources/memory_source.h"

namespace cherenkov::model_data::gguf {
namespace {

using testing::array_payload;
using testing::Bytes;
using testing::cat;
using testing::f32;
using testing::f64;
using testing::GgufBuilder;
using testing::gstr;
using testing::TensorSpec;
using testing::u16;
using testing::u32;
using testing::u64;
using testing::u8;

constexpr uint32_t id(GgufValueType type) {
    return static_cast<uint32_t>(type);
}

constexpr uint32_t kF32 = 0;
constexpr uint32_t kF16 = 1;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kQ4_K = 12;

// A file on disk for the life of the test.
class TempFile {
public:
    TempFile(const std::string& name, const Bytes& bytes)
        : path_(testing::write_temp_file(name, bytes)) {}
    ~TempFile() { std::filesystem::remove(path_); }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

GgufFile read_file(const std::string& name, const Bytes& bytes) {
    TempFile file(name, bytes);
    return read_gguf(*open_file_source(file.path()));
}

struct Failure {
    ErrorKind kind = ErrorKind::Internal;
    std::string message;
    std::string path;
};

Failure read_failure(const std::string& name, const Bytes& bytes) {
    TempFile file(name, bytes);
    try {
        read_gguf(*open_file_source(file.path()));
    } catch (const Error& e) {
        return {e.kind(), e.what(), file.path()};
    }
    ADD_FAILURE() << name << ": read_gguf accepted a malformed file";
    return {ErrorKind::Internal, "", file.path()};
}

// The message names the file and every one of `parts`.
void expect_message(const Failure& failure, std::initializer_list<std::string_view> parts) {
    EXPECT_NE(failure.message.find(failure.path), std::string::npos)
        << "message does not name the file: " << failure.message;
    for (std::string_view part : parts) {
        EXPECT_NE(failure.message.find(part), std::string::npos)
            << "message lacks '" << part << "': " << failure.message;
    }
}

// A valid file that uses every value type, arrays (nested, empty, of strings) and two tensors
// whose data ends exactly at the end of the file.
GgufBuilder rich_builder() {
    GgufBuilder builder;
    builder.kv("general.architecture", id(GgufValueType::String), gstr("qwen3moe"))
        .kv("a.u8", id(GgufValueType::Uint8), u8(200))
        .kv("a.i8", id(GgufValueType::Int8), u8(0x80))
        .kv("a.u16", id(GgufValueType::Uint16), u16(65535))
        .kv("a.i16", id(GgufValueType::Int16), u16(0xFFFE))
        .kv("a.u32", id(GgufValueType::Uint32), u32(4000000000u))
        .kv("a.i32", id(GgufValueType::Int32), u32(0x80000000u))
        .kv("a.f32", id(GgufValueType::Float32), f32(0.1f))
        .kv("a.bool", id(GgufValueType::Bool), u8(1))
        .kv("a.u64", id(GgufValueType::Uint64), u64(std::numeric_limits<uint64_t>::max()))
        .kv("a.i64", id(GgufValueType::Int64), u64(0x8000000000000000ull))
        .kv("a.f64", id(GgufValueType::Float64), f64(-2.5e300))
        .kv("a.tokens", id(GgufValueType::Array),
            array_payload(id(GgufValueType::String), 3,
                          cat({gstr("!"), gstr("\""), gstr("\xC3\xA9t\xC3\xA9")})))
        .kv("a.i16s", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Int16), 3, cat({u16(1), u16(0xFFFF), u16(0x8000)})))
        .kv("a.empty", id(GgufValueType::Array), array_payload(id(GgufValueType::Float32), 0, {}))
        .kv("a.nested", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Array), 2,
                          cat({array_payload(id(GgufValueType::Uint8), 2, cat({u8(1), u8(2)})),
                               array_payload(id(GgufValueType::String), 1, gstr("x"))})));
    builder.tensor({"token_embd.weight", {3, 2}, kF32, 0});
    builder.tensor({"blk.0.ffn_down.weight", {64, 2}, kQ8_0, 32});
    builder.data = Bytes(32 + 136, std::byte{0x11});
    return builder;
}

TEST(GgufFile, ReadsEveryScalarValueType) {
    const GgufFile file = read_file("scalars.gguf", rich_builder().build());
    EXPECT_EQ(file.version, 3u);
    ASSERT_EQ(file.metadata.size(), 16u);
    EXPECT_EQ(file.architecture(), "qwen3moe");

    const auto expect_type = [&](std::string_view key, GgufValueType type) {
        const GgufValue* value = file.find(key);
        ASSERT_NE(value, nullptr) << key;
        EXPECT_EQ(value->type(), type) << key;
    };
    expect_type("a.u8", GgufValueType::Uint8);
    expect_type("a.i8", GgufValueType::Int8);
    expect_type("a.u16", GgufValueType::Uint16);
    expect_type("a.i16", GgufValueType::Int16);
    expect_type("a.u32", GgufValueType::Uint32);
    expect_type("a.i32", GgufValueType::Int32);
    expect_type("a.f32", GgufValueType::Float32);
    expect_type("a.bool", GgufValueType::Bool);
    expect_type("a.u64", GgufValueType::Uint64);
    expect_type("a.i64", GgufValueType::Int64);
    expect_type("a.f64", GgufValueType::Float64);

    EXPECT_EQ(file.find("a.u8")->as_unsigned(), 200u);
    EXPECT_EQ(file.find("a.i8")->as_signed(), -128);
    EXPECT_EQ(file.find("a.u16")->as_unsigned(), 65535u);
    EXPECT_EQ(file.find("a.i16")->as_signed(), -2);
    EXPECT_EQ(file.find("a.u32")->as_unsigned(), 4000000000u);
    EXPECT_EQ(file.find("a.i32")->as_signed(), std::numeric_limits<int32_t>::min());
    EXPECT_EQ(file.find("a.f32")->as_float(), static_cast<double>(0.1f));
    EXPECT_TRUE(file.find("a.bool")->as_bool());
    EXPECT_EQ(file.find("a.u64")->as_unsigned(), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(file.find("a.i64")->as_signed(), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(file.find("a.f64")->as_float(), -2.5e300);
    EXPECT_EQ(file.find("general.architecture")->as_string(), "qwen3moe");
    EXPECT_EQ(file.find("missing"), nullptr);
    // File order is kept.
    EXPECT_EQ(file.metadata.front().key, "general.architecture");
    EXPECT_EQ(file.metadata.back().key, "a.nested");
}

TEST(GgufFile, ReadsArraysNestedAndEmpty) {
    const GgufFile file = read_file("arrays.gguf", rich_builder().build());

    const GgufValue& tokens = *file.find("a.tokens");
    ASSERT_EQ(tokens.type(), GgufValueType::Array);
    EXPECT_EQ(tokens.element_type(), GgufValueType::String);
    ASSERT_EQ(tokens.array_size(), 3u);
    EXPECT_EQ(tokens.element(0).as_string(), "!");
    EXPECT_EQ(tokens.element(1).as_string(), "\"");
    EXPECT_EQ(tokens.element(2).as_string(), "\xC3\xA9t\xC3\xA9");

    const GgufValue& shorts = *file.find("a.i16s");
    EXPECT_EQ(shorts.element_type(), GgufValueType::Int16);
    ASSERT_EQ(shorts.array_size(), 3u);
    EXPECT_EQ(shorts.element(0).as_signed(), 1);
    EXPECT_EQ(shorts.element(1).as_signed(), -1);
    EXPECT_EQ(shorts.element(2).as_signed(), -32768);
    EXPECT_EQ(shorts.element(2).type(), GgufValueType::Int16);

    const GgufValue& empty = *file.find("a.empty");
    EXPECT_EQ(empty.element_type(), GgufValueType::Float32);
    EXPECT_EQ(empty.array_size(), 0u);

    const GgufValue& nested = *file.find("a.nested");
    EXPECT_EQ(nested.element_type(), GgufValueType::Array);
    ASSERT_EQ(nested.array_size(), 2u);
    const GgufValue bytes = nested.element(0);
    EXPECT_EQ(bytes.element_type(), GgufValueType::Uint8);
    ASSERT_EQ(bytes.array_size(), 2u);
    EXPECT_EQ(bytes.element(1).as_unsigned(), 2u);
    const GgufValue strings = nested.element(1);
    EXPECT_EQ(strings.element_type(), GgufValueType::String);
    EXPECT_EQ(strings.element(0).as_string(), "x");
}

TEST(GgufFile, ReadsArraysOfEveryScalarType) {
    GgufBuilder builder;
    builder
        .kv("u8", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Uint8), 2, cat({u8(0), u8(255)})))
        .kv("i8", id(GgufValueType::Array), array_payload(id(GgufValueType::Int8), 1, u8(0xFF)))
        .kv("u16", id(GgufValueType::Array), array_payload(id(GgufValueType::Uint16), 1, u16(513)))
        .kv("u32", id(GgufValueType::Array), array_payload(id(GgufValueType::Uint32), 1, u32(7)))
        .kv("i32", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Int32), 1, u32(0xFFFFFFF6u)))
        .kv("f32", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Float32), 1, f32(-1.5f)))
        .kv("bool", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Bool), 2, cat({u8(0), u8(1)})))
        .kv("u64", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Uint64), 1, u64(1ull << 40)))
        .kv("i64", id(GgufValueType::Array), array_payload(id(GgufValueType::Int64), 1, u64(~0ull)))
        .kv("f64", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Float64), 1, f64(1e-300)))
        .kv("arrays", id(GgufValueType::Array), array_payload(id(GgufValueType::Array), 0, {}));
    const GgufFile file = read_file("scalar_arrays.gguf", builder.build());
    EXPECT_EQ(file.find("u8")->element(1).as_unsigned(), 255u);
    EXPECT_EQ(file.find("i8")->element(0).as_signed(), -1);
    EXPECT_EQ(file.find("u16")->element(0).as_unsigned(), 513u);
    EXPECT_EQ(file.find("u32")->element(0).as_unsigned(), 7u);
    EXPECT_EQ(file.find("i32")->element(0).as_signed(), -10);
    EXPECT_EQ(file.find("f32")->element(0).as_float(), -1.5);
    EXPECT_FALSE(file.find("bool")->element(0).as_bool());
    EXPECT_TRUE(file.find("bool")->element(1).as_bool());
    EXPECT_EQ(file.find("u64")->element(0).as_unsigned(), 1ull << 40);
    EXPECT_EQ(file.find("i64")->element(0).as_signed(), -1);
    EXPECT_EQ(file.find("f64")->element(0).as_float(), 1e-300);
    EXPECT_EQ(file.find("arrays")->element_type(), GgufValueType::Array);
    EXPECT_EQ(file.find("arrays")->array_size(), 0u);
    EXPECT_TRUE(file.tensors.empty());
}

TEST(GgufFile, ComputesTensorShapesAndByteRanges) {
    const Bytes bytes = rich_builder().build();
    const GgufFile file = read_file("layout.gguf", bytes);
    EXPECT_EQ(file.alignment, 32u);
    EXPECT_EQ(file.data_offset % 32, 0u);
    EXPECT_GE(file.data_offset, file.header_bytes);
    EXPECT_LT(file.data_offset - file.header_bytes, 32u);
    EXPECT_EQ(file.file_size, bytes.size());
    ASSERT_EQ(file.tensors.size(), 2u);

    const GgufTensorInfo& embedding = file.tensors[0];
    EXPECT_EQ(embedding.name, "token_embd.weight");
    EXPECT_EQ(embedding.shape, (std::vector<uint64_t>{2, 3}));  // ne = [3, 2] reversed
    EXPECT_EQ(embedding.type.name, "F32");
    EXPECT_EQ(embedding.n_elements, 6u);
    EXPECT_EQ(embedding.n_bytes, 24u);
    EXPECT_EQ(embedding.relative_offset, 0u);
    EXPECT_EQ(embedding.file_offset, file.data_offset);

    const GgufTensorInfo& down = file.tensors[1];
    EXPECT_EQ(down.shape, (std::vector<uint64_t>{2, 64}));
    EXPECT_EQ(down.type.id, kQ8_0);
    EXPECT_EQ(down.n_bytes, 2u * 2u * 34u);  // 2 rows of 2 blocks of 34 bytes
    EXPECT_EQ(down.file_offset, file.data_offset + 32);
    EXPECT_EQ(down.file_offset + down.n_bytes, bytes.size());
}

TEST(GgufFile, ReadsFourDimensionalAndScalarTensors) {
    GgufBuilder builder;
    builder.tensor({"cube", {256, 2, 3, 4}, kQ4_K, 0});
    builder.tensor({"scalar", {}, kF16, 3488});
    builder.data = Bytes(3488 + 2, std::byte{0});
    const GgufFile file = read_file("dims.gguf", builder.build());
    EXPECT_EQ(file.tensors[0].shape, (std::vector<uint64_t>{4, 3, 2, 256}));
    EXPECT_EQ(file.tensors[0].n_bytes, 24u * 144u);
    EXPECT_TRUE(file.tensors[1].shape.empty());
    EXPECT_EQ(file.tensors[1].n_elements, 1u);
    EXPECT_EQ(file.tensors[1].n_bytes, 2u);
}

// Wraps a source and records every read, to check the header is read in a few chunks.
class CountingSource final : public ByteSource {
public:
    explicit CountingSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {}
    const std::string& name() const override { return inner_->name(); }
    uint64_t size() const override { return inner_->size(); }
    void read(uint64_t offset, std::span<std::byte> out) const override {
        ++n_reads_;
        n_bytes_ += out.size();
        inner_->read(offset, out);
    }
    uint64_t n_reads() const { return n_reads_; }
    uint64_t n_bytes() const { return n_bytes_; }

private:
    std::unique_ptr<ByteSource> inner_;
    mutable uint64_t n_reads_ = 0;
    mutable uint64_t n_bytes_ = 0;
};

TEST(GgufFile, ReadsOnlyTheHeaderInFewChunks) {
    GgufBuilder builder = rich_builder();
    builder.tensor({"big", {1024, 1024}, kF32, 256});
    builder.data.resize(256 + 4 * 1024 * 1024, std::byte{0});
    CountingSource source(open_memory_source("big.gguf", builder.build()));
    const GgufFile file = read_gguf(source);
    EXPECT_EQ(file.tensors.back().n_bytes, 4u * 1024 * 1024);
    EXPECT_EQ(source.n_reads(), 1u);
    EXPECT_LE(source.n_bytes(), 64u * 1024);
}

TEST(GgufFile, ReadsValuesAcrossChunkBoundaries) {
    Bytes tokens;
    const int n_tokens = 30000;  // about 480 KiB of strings: several chunks
    for (int token = 0; token < n_tokens; ++token) {
        const Bytes encoded = gstr("token" + std::to_string(token));
        tokens.insert(tokens.end(), encoded.begin(), encoded.end());
    }
    const std::string long_text(300 * 1024, 'z');  // larger than the first chunks
    Bytes bytes_array(700 * 1024);
    for (size_t index = 0; index < bytes_array.size(); ++index) {
        bytes_array[index] = static_cast<std::byte>(index % 251);
    }
    GgufBuilder builder;
    builder
        .kv("tokens", id(GgufValueType::Array),
            array_payload(id(GgufValueType::String), n_tokens, tokens))
        .kv("long", id(GgufValueType::String), gstr(long_text))
        .kv("bytes", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Uint8), bytes_array.size(), bytes_array))
        .kv("after", id(GgufValueType::Uint32), u32(77));
    CountingSource source(open_memory_source("chunks.gguf", builder.build()));
    const GgufFile file = read_gguf(source);
    const GgufValue& read_tokens = *file.find("tokens");
    ASSERT_EQ(read_tokens.array_size(), static_cast<uint64_t>(n_tokens));
    for (int token = 0; token < n_tokens; token += 997) {
        EXPECT_EQ(read_tokens.element(token).as_string(), "token" + std::to_string(token));
    }
    EXPECT_EQ(read_tokens.element(n_tokens - 1).as_string(),
              "token" + std::to_string(n_tokens - 1));
    EXPECT_EQ(file.find("long")->as_string(), long_text);
    const GgufValue& read_bytes = *file.find("bytes");
    ASSERT_EQ(read_bytes.array_size(), bytes_array.size());
    for (size_t index = 0; index < bytes_array.size(); index += 4099) {
        EXPECT_EQ(read_bytes.element(index).as_unsigned(), index % 251);
    }
    EXPECT_EQ(file.find("after")->as_unsigned(), 77u);
    EXPECT_LE(source.n_reads(), 12u);
    EXPECT_EQ(source.n_bytes(), source.size());
}

TEST(GgufFile, HonoursAlignmentOverride) {
    GgufBuilder builder;
    builder.alignment = 64;
    builder.kv("general.alignment", id(GgufValueType::Uint32), u32(64));
    builder.tensor({"a", {4}, kF32, 0});
    builder.tensor({"b", {4}, kF32, 64});
    builder.data = Bytes(64 + 16, std::byte{0});
    const GgufFile file = read_file("align64.gguf", builder.build());
    EXPECT_EQ(file.alignment, 64u);
    EXPECT_EQ(file.data_offset % 64, 0u);
    EXPECT_EQ(file.tensors[1].file_offset, file.data_offset + 64);
}

TEST(GgufFile, RejectsOffsetMisalignedForOverriddenAlignment) {
    GgufBuilder builder;
    builder.alignment = 64;
    builder.kv("general.alignment", id(GgufValueType::Uint32), u32(64));
    builder.tensor({"a", {4}, kF32, 0});
    builder.tensor({"b", {4}, kF32, 32});
    builder.data = Bytes(64, std::byte{0});
    const Failure failure = read_failure("misaligned64.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 'b' offset", "not a multiple of the alignment 64"});
}

TEST(GgufFile, RejectsBadAlignmentValues) {
    GgufBuilder not_power;
    not_power.kv("general.alignment", id(GgufValueType::Uint32), u32(48));
    expect_message(read_failure("align48.gguf", not_power.build()),
                   {"general.alignment", "48", "power of two"});

    GgufBuilder zero;
    zero.kv("general.alignment", id(GgufValueType::Uint32), u32(0));
    expect_message(read_failure("align0.gguf", zero.build()), {"general.alignment", "0"});

    GgufBuilder wrong_type;
    wrong_type.kv("general.alignment", id(GgufValueType::Uint64), u64(32));
    expect_message(read_failure("align_u64.gguf", wrong_type.build()),
                   {"general.alignment", "uint64", "expected uint32"});
}

TEST(GgufFile, ReadsVersion2) {
    GgufBuilder builder = rich_builder();
    builder.version = 2;
    const GgufFile file = read_file("v2.gguf", builder.build());
    EXPECT_EQ(file.version, 2u);
    EXPECT_EQ(file.tensors.size(), 2u);
}

TEST(GgufFile, RejectsBadMagic) {
    Bytes bytes = rich_builder().build();
    bytes[3] = std::byte{'X'};
    const Failure failure = read_failure("magic.gguf", bytes);
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"not a GGUF file", "magic", "47 47 55 58"});

    expect_message(read_failure("tiny.gguf", Bytes{std::byte{'G'}, std::byte{'G'}}),
                   {"not a GGUF file", "2 bytes"});
}

TEST(GgufFile, RejectsVersion1AndUnknownVersions) {
    GgufBuilder v1 = rich_builder();
    v1.version = 1;
    Failure failure = read_failure("v1.gguf", v1.build());
    EXPECT_EQ(failure.kind, ErrorKind::Unsupported);
    expect_message(failure, {"version", "1", "not supported"});

    GgufBuilder v0 = rich_builder();
    v0.version = 0;
    failure = read_failure("v0.gguf", v0.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"version", "is 0", "invalid"});

    GgufBuilder v4 = rich_builder();
    v4.version = 4;
    failure = read_failure("v4.gguf", v4.build());
    EXPECT_EQ(failure.kind, ErrorKind::Unsupported);
    expect_message(failure, {"version", "4"});
}

TEST(GgufFile, RejectsByteSwappedFile) {
    GgufBuilder swapped = rich_builder();
    swapped.version = 0x03000000;  // 3 written big-endian
    const Failure failure = read_failure("big_endian.gguf", swapped.build());
    EXPECT_EQ(failure.kind, ErrorKind::Unsupported);
    expect_message(failure, {"version", "byte-swapped", "big-endian"});
}

TEST(GgufFile, EveryTruncatedPrefixThrowsError) {
    const Bytes bytes = rich_builder().build();
    for (size_t length = 0; length < bytes.size(); ++length) {
        const std::string name = "prefix_" + std::to_string(length) + ".gguf";
        auto source = open_memory_source(
            name, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)));
        try {
            read_gguf(*source);
            ADD_FAILURE() << "prefix of " << length << " bytes was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
            EXPECT_TRUE(e.kind() == ErrorKind::Corrupt) << length << ": " << e.what();
        }
    }
    // The whole file still reads.
    EXPECT_EQ(read_gguf(*open_memory_source("whole.gguf", bytes)).tensors.size(), 2u);
}

TEST(GgufFile, TruncatedFileNamesFieldAndOffset) {
    GgufBuilder builder;
    builder.kv("general.name", id(GgufValueType::String), gstr("abc"));
    const Bytes bytes = builder.header();
    // Cut inside the key bytes: 24 bytes of preamble, 8 of key length, 5 of the 12 key bytes.
    const Failure failure = read_failure("cut.gguf", Bytes(bytes.begin(), bytes.begin() + 37));
    expect_message(failure, {"metadata[0] key", "at byte 32", "needs 12 bytes", "truncated"});
}

TEST(GgufFile, RejectsHugeStringLength) {
    GgufBuilder builder;
    builder.raw_kv(cat({u64(1ull << 62), Bytes(16, std::byte{'k'})}));
    Failure failure = read_failure("huge_key.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"metadata[0] key", "length"});

    GgufBuilder value;
    value.kv("general.name", id(GgufValueType::String), cat({u64(~0ull), gstr("abc")}));
    failure = read_failure("huge_string.gguf", value.build());
    expect_message(failure,
                   {"metadata 'general.name'", "needs 18446744073709551615 bytes", "truncated"});
}

TEST(GgufFile, RejectsHugeArrayCount) {
    GgufBuilder builder;
    builder.kv("tokens", id(GgufValueType::Array),
               array_payload(id(GgufValueType::String), 1ull << 60, gstr("a")));
    Failure failure = read_failure("huge_array.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"metadata 'tokens' element count", "1152921504606846976"});

    GgufBuilder numbers;
    numbers.kv("n", id(GgufValueType::Array),
               array_payload(id(GgufValueType::Uint64), 3, cat({u64(1), u64(2)})));
    failure = read_failure("short_array.gguf", numbers.header());
    expect_message(failure, {"metadata 'n' element count", "3 uint64 elements"});
}

TEST(GgufFile, RejectsHugeCounts) {
    GgufBuilder kvs;
    kvs.n_kv_override = ~0ull;
    expect_message(read_failure("huge_kv_count.gguf", kvs.build()),
                   {"metadata_kv_count", "at byte 16"});

    GgufBuilder tensors;
    tensors.n_tensors_override = 1ull << 40;
    expect_message(read_failure("huge_tensor_count.gguf", tensors.build()),
                   {"tensor_count", "at byte 8"});
}

TEST(GgufFile, RejectsMalformedValues) {
    GgufBuilder bad_type;
    bad_type.kv("x", 13, u32(0));
    expect_message(read_failure("value_type.gguf", bad_type.build()),
                   {"metadata 'x' value type", "unknown value type 13"});

    GgufBuilder bad_bool;
    bad_bool.kv("flag", id(GgufValueType::Bool), u8(2));
    expect_message(read_failure("bool.gguf", bad_bool.build()), {"metadata 'flag'", "not 0 or 1"});

    GgufBuilder bad_bool_array;
    bad_bool_array.kv("flags", id(GgufValueType::Array),
                      array_payload(id(GgufValueType::Bool), 2, cat({u8(1), u8(7)})));
    expect_message(read_failure("bool_array.gguf", bad_bool_array.build()),
                   {"metadata 'flags'[1]", "not 0 or 1"});

    GgufBuilder bad_element_type;
    bad_element_type.kv("a", id(GgufValueType::Array), array_payload(99, 0, {}));
    expect_message(read_failure("element_type.gguf", bad_element_type.build()),
                   {"metadata 'a' element type", "99"});

    GgufBuilder duplicate;
    duplicate.kv("k", id(GgufValueType::Uint8), u8(1)).kv("k", id(GgufValueType::Uint8), u8(2));
    expect_message(read_failure("duplicate_key.gguf", duplicate.build()),
                   {"metadata 'k'", "duplicate key"});
}

TEST(GgufFile, RejectsDeeplyNestedArrays) {
    Bytes nested = array_payload(id(GgufValueType::Uint8), 0, {});
    for (int level = 0; level < 40; ++level) {
        nested = array_payload(id(GgufValueType::Array), 1, nested);
    }
    GgufBuilder builder;
    builder.kv("deep", id(GgufValueType::Array), nested);
    const Failure failure = read_failure("deep.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Unsupported);
    expect_message(failure, {"metadata 'deep'", "nested deeper than"});
}

TEST(GgufFile, RejectsTooManyDimensions) {
    GgufBuilder builder;
    builder.tensor({"t", {1, 1, 1, 1, 1}, kF32, 0});
    builder.data = Bytes(4, std::byte{0});
    const Failure failure = read_failure("dims5.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 't' n_dims", "5 dimensions"});
}

TEST(GgufFile, RejectsDuplicateTensorName) {
    GgufBuilder builder;
    builder.tensor({"w", {8}, kF32, 0});
    builder.tensor({"w", {8}, kF32, 32});
    builder.data = Bytes(64, std::byte{0});
    expect_message(read_failure("duplicate_tensor.gguf", builder.build()),
                   {"tensor_info[1] name", "duplicate tensor name 'w'"});
}

TEST(GgufFile, RejectsLongTensorName) {
    GgufBuilder builder;
    builder.tensor({std::string(64, 'n'), {8}, kF32, 0});
    builder.data = Bytes(32, std::byte{0});
    expect_message(read_failure("long_name.gguf", builder.build()),
                   {"tensor_info[0] name", "length 64", "63"});

    GgufBuilder ok;
    ok.tensor({std::string(63, 'n'), {8}, kF32, 0});
    ok.data = Bytes(32, std::byte{0});
    EXPECT_EQ(read_file("name63.gguf", ok.build()).tensors[0].name.size(), 63u);
}

TEST(GgufFile, RejectsMisalignedOffset) {
    GgufBuilder builder;
    builder.tensor({"w", {8}, kF32, 4});
    builder.data = Bytes(36, std::byte{0});
    const Failure failure = read_failure("misaligned.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 'w' offset", "data offset 4", "alignment 32"});
}

TEST(GgufFile, RejectsTensorPastEndOfFile) {
    GgufBuilder builder;
    builder.tensor({"w", {8}, kF32, 0});
    builder.data = Bytes(31, std::byte{0});
    const Failure failure = read_failure("past_end.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 'w'", "32 bytes", "runs past the end"});

    GgufBuilder far;
    far.tensor({"w", {8}, kF32, ~0ull - 31});
    expect_message(read_failure("far_offset.gguf", far.build()), {"tensor 'w'", "past the end"});
}

TEST(GgufFile, RejectsOverlappingTensors) {
    GgufBuilder builder;
    builder.tensor({"a", {16}, kF32, 0});
    builder.tensor({"b", {8}, kF32, 32});
    builder.data = Bytes(64, std::byte{0});
    const Failure failure = read_failure("overlap.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 'b'", "overlaps tensor 'a'"});
}

TEST(GgufFile, RejectsUnknownGgmlType) {
    for (uint32_t type : {4u, 5u, 31u, 33u, 36u, 38u, 43u, 1000u}) {
        GgufBuilder builder;
        builder.tensor({"w", {32}, type, 0});
        builder.data = Bytes(4096, std::byte{0});
        const Failure failure =
            read_failure("type_" + std::to_string(type) + ".gguf", builder.build());
        EXPECT_EQ(failure.kind, ErrorKind::Unsupported);
        expect_message(failure,
                       {"tensor 'w' type", "unknown ggml type id " + std::to_string(type)});
    }
}

TEST(GgufFile, RejectsRowNotMultipleOfBlockSize) {
    GgufBuilder builder;
    builder.tensor({"q", {48, 2}, kQ8_0, 0});
    builder.data = Bytes(4096, std::byte{0});
    const Failure failure = read_failure("block.gguf", builder.build());
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    expect_message(failure, {"tensor 'q' ne[0]", "48", "Q8_0", "block size 32"});
}

TEST(GgufFile, RejectsElementCountOverflow) {
    GgufBuilder builder;
    builder.tensor({"w", {1ull << 40, 1ull << 40}, kF32, 0});
    expect_message(read_failure("overflow.gguf", builder.build()),
                   {"tensor 'w' ne[1]", "overflow"});

    GgufBuilder negative;
    negative.tensor({"w", {~0ull}, kF32, 0});
    expect_message(read_failure("negative.gguf", negative.build()), {"tensor 'w' ne[0]"});
}

TEST(GgmlType, TableMatchesGgmlBlockSizes) {
    struct Expected {
        uint32_t id;
        std::string_view name;
        uint32_t block_size;
        uint32_t type_size;
    };
    const Expected expected[] = {
        {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
        {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
        {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
        {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
        {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
        {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
        {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
        {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
        {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18},
    };
    ASSERT_EQ(ggml_types().size(), std::size(expected));
    for (const Expected& row : expected) {
        const auto info = ggml_type_info(row.id);
        ASSERT_TRUE(info.has_value()) << row.name;
        EXPECT_EQ(info->name, row.name);
        EXPECT_EQ(info->block_size, row.block_size) << row.name;
        EXPECT_EQ(info->type_size, row.type_size) << row.name;
        EXPECT_EQ(info->quantized, row.block_size > 1) << row.name;
    }
    for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 0xFFFFFFFFu}) {
        EXPECT_FALSE(ggml_type_info(removed).has_value()) << removed;
    }
}

TEST(GgufValue, NamesEveryType) {
    EXPECT_EQ(gguf_value_type_name(GgufValueType::Uint8), "uint8");
    EXPECT_EQ(gguf_value_type_name(GgufValueType::Float32), "float32");
    EXPECT_EQ(gguf_value_type_name(GgufValueType::Array), "array");
    EXPECT_EQ(gguf_value_type_name(GgufValueType::Float64), "float64");
    EXPECT_FALSE(gguf_value_type_from_id(13).has_value());
    EXPECT_EQ(gguf_value_type_from_id(12), GgufValueType::Float64);
}

}  // namespace
}  // namespace cherenkov::model_data::gguf
