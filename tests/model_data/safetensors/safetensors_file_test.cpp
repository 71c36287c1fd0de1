#include "model_data/safetensors/safetensors_file.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/safetensors_writer.h"
#include "support/temp_dir.h"

namespace cherenkov::model_data {
namespace {

using cherenkov::testing::SafetensorsWriter;
using cherenkov::testing::TempDir;

SafetensorsFile open_bytes(const TempDir& dir, const std::string& bytes, const std::string& name = "t.safetensors") {
    return SafetensorsFile::open(std::shared_ptr<const ByteSource>(open_file_source(dir.write(name, bytes))));
}

// Expects `fn` to throw a cherenkov::Error whose message contains every fragment.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> fragments) {
    try {
        fn();
        FAIL() << "expected an error";
    } catch (const Error& error) {
        for (const auto& fragment : fragments) {
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
                << "message '" << error.what() << "' lacks '" << fragment << "'";
        }
    }
}

SafetensorsWriter sample() {
    SafetensorsWriter writer;
    writer.add_filled("a.weight", "BF16", {4, 8}, 2, 1);
    writer.add_filled("b.bias", "F32", {8}, 4, 2);
    writer.add_filled("c.scalar", "I64", {}, 8, 3);
    writer.add("d.empty", "F16", {0, 4}, "");
    writer.header()["__metadata__"] = {{"format", "pt"}};
    return writer;
}

TEST(SafetensorsFile, ReadsHeaderTensorsAndMetadata) {
    TempDir dir;
    SafetensorsWriter writer = sample();
    SafetensorsFile file = open_bytes(dir, writer.bytes());
    ASSERT_EQ(file.tensors().size(), 4u);
    const TensorInfo& a = file.tensor("a.weight");
    EXPECT_EQ(a.dtype, Dtype::BF16);
    EXPECT_EQ(a.shape, (std::vector<uint64_t>{4, 8}));
    EXPECT_EQ(a.n_bytes(), 64u);
    EXPECT_EQ(file.tensor("c.scalar").n_elements, 1u);
    EXPECT_EQ(file.tensor("d.empty").n_bytes(), 0u);
    EXPECT_EQ(file.header().metadata.at("format"), "pt");
    EXPECT_EQ(file.header().data_offset, 8 + writer.header().dump().size());
    auto bytes = file.read_tensor(file.tensor("b.bias"));
    ASSERT_EQ(bytes.size(), 32u);
    EXPECT_EQ(std::to_integer<int>(bytes[0]), 2);
    EXPECT_EQ(std::to_integer<int>(bytes[1]), 9);
}

TEST(SafetensorsFile, StreamsPartialReadsAndRejectsOutOfRange) {
    TempDir dir;
    SafetensorsFile file = open_bytes(dir, sample().bytes());
    const TensorInfo& a = file.tensor("a.weight");
    std::vector<std::byte> part(10);
    file.read_tensor_bytes(a, 5, part);
    EXPECT_EQ(std::to_integer<int>(part[0]), (5 * 7 + 1) % 251);
    std::vector<std::byte> too_long(60);
    expect_error([&] { file.read_tensor_bytes(a, 5, too_long); }, {"a.weight", "outside"});
    expect_error([&] { file.tensor("missing"); }, {"missing"});
}

TEST(SafetensorsFile, MappedViewOutlivesTheFileObject) {
    TempDir dir;
    SafetensorsWriter writer = sample();
    TensorView view;
    {
        SafetensorsFile file = open_bytes(dir, writer.bytes());
        view = file.map_tensor(file.tensor("b.bias"));
    }
    ASSERT_EQ(view.bytes.size(), 32u);
    EXPECT_EQ(std::to_integer<int>(view.bytes[1]), 9);
    EXPECT_EQ(view.holder.use_count(), 1);
}

TEST(SafetensorsFile, AcceptsHeaderPaddedWithSpaces) {
    TempDir dir;
    SafetensorsWriter writer = sample();
    std::string json_text = "  " + writer.header().dump() + "      ";
    SafetensorsFile file = open_bytes(dir, writer.bytes_with_header(json_text));
    EXPECT_EQ(file.tensors().size(), 4u);
}

TEST(SafetensorsFile, AcceptsEveryDtype) {
    TempDir dir;
    SafetensorsWriter writer;
    const std::vector<std::pair<std::string, int>> dtypes = {
        {"BOOL", 8}, {"U8", 8}, {"I8", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32},
        {"U32", 32}, {"F32", 32}, {"I64", 64}, {"U64", 64}, {"F64", 64}, {"C64", 64}, {"F8_E4M3", 8},
        {"F8_E5M2", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"F4", 4}, {"F6_E2M3", 6},
        {"F6_E3M2", 6}};
    for (const auto& [dtype, bits] : dtypes) {
        uint64_t n_bytes = 8 * static_cast<uint64_t>(bits) / 8;  // 8 elements
        writer.add("t." + dtype, dtype, {2, 4}, std::string(n_bytes, '\x01'));
    }
    SafetensorsFile file = open_bytes(dir, writer.bytes());
    EXPECT_EQ(file.tensors().size(), dtypes.size());
    EXPECT_EQ(file.tensor("t.F4").n_bytes(), 4u);
    EXPECT_EQ(file.tensor("t.F6_E2M3").n_bytes(), 6u);
}

TEST(SafetensorsFile, RejectsSubByteTensorsThatEndMidByte) {
    TempDir dir;
    SafetensorsWriter writer;
    writer.add("odd", "F4", {3}, "\x01\x02");
    expect_error([&] { open_bytes(dir, writer.bytes()); }, {"t.safetensors", "odd", "multiple of 8"});
}

TEST(SafetensorsFile, RejectsEveryTruncation) {
    TempDir dir;
    std::string bytes = sample().bytes();
    for (size_t length = 0; length < bytes.size(); ++length) {
        std::string name = "trunc" + std::to_string(length) + ".safetensors";
        try {
            open_bytes(dir, bytes.substr(0, length), name);
            ADD_FAILURE() << "truncated to " << length << " bytes was accepted";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
        }
    }
}

TEST(SafetensorsFile, RejectsBadHeaderLengths) {
    TempDir dir;
    SafetensorsWriter writer = sample();
    std::string good = writer.bytes();
    std::string huge = good;
    huge[5] = '\x7f';  // N around 2^47
    expect_error([&] { open_bytes(dir, huge); }, {"t.safetensors", "header length"});
    std::string past_end = good;
    uint64_t n = good.size();  // longer than what follows the length field
    for (int index = 0; index < 8; ++index) past_end[index] = static_cast<char>((n >> (8 * index)) & 0xFF);
    expect_error([&] { open_bytes(dir, past_end); }, {"runs past the end"});
    expect_error([&] { open_bytes(dir, std::string(8, '\0')); }, {"header length 0"});
    expect_error([&] { open_bytes(dir, "abc"); }, {"too short"});
}

TEST(SafetensorsFile, RejectsMalformedJson) {
    TempDir dir;
    SafetensorsWriter writer = sample();
    expect_error([&] { open_bytes(dir, writer.bytes_with_header("{\"a\": ")); }, {"not valid JSON"});
    expect_error([&] { open_bytes(dir, writer.bytes_with_header("[1, 2]")); }, {"JSON object"});
    expect_error([&] { open_bytes(dir, writer.bytes_with_header("{\"x\": \"\xff\xfe\"}")); }, {"not valid JSON"});
}

TEST(SafetensorsFile, RejectsDuplicateKeys) {
    TempDir dir;
    SafetensorsWriter writer;
    writer.add_filled("a", "U8", {4}, 1);
    std::string entry = writer.header()["a"].dump();
    std::string json_text = "{\"a\":" + entry + ",\"a\":" + entry + "}";
    expect_error([&] { open_bytes(dir, writer.bytes_with_header(json_text)); }, {"duplicate key 'a'"});
}

TEST(SafetensorsFile, RejectsInvalidEntries) {
    TempDir dir;
    auto mutate = [&](auto&& edit, std::initializer_list<std::string> fragments) {
        SafetensorsWriter writer = sample();
        edit(writer);
        expect_error([&] { open_bytes(dir, writer.bytes()); }, fragments);
    };
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["dtype"] = "Q4"; }, {"a.weight", "unknown dtype 'Q4'"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"].erase("shape"); }, {"a.weight", ".shape"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["shape"] = {4, -8}; }, {"a.weight", "shape[1]"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["shape"] = {4, 9}; }, {"a.weight", "needs 72 bytes"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["data_offsets"] = {64, 0}; }, {"before begin"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["data_offsets"] = {0}; }, {"data_offsets"});
    mutate([](SafetensorsWriter& w) { w.header()["__metadata__"] = {{"n", 1}}; }, {"__metadata__.n"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"] = "x"; }, {"a.weight", "expected an object"});
    mutate([](SafetensorsWriter& w) { w.header()["a.weight"]["shape"] = {1ULL << 40, 1ULL << 40, 1ULL << 20}; },
           {"overflows"});
}

TEST(SafetensorsFile, RejectsOverlapsGapsAndTrailingBytes) {
    TempDir dir;
    SafetensorsWriter overlap;
    overlap.add_filled("a", "U8", {8}, 1).add_filled("b", "U8", {8}, 1);
    overlap.header()["b"]["data_offsets"] = {4, 12};
    overlap.data().resize(12);
    expect_error([&] { open_bytes(dir, overlap.bytes()); }, {"'b'", "overlaps"});

    SafetensorsWriter gap;
    gap.add_filled("a", "U8", {8}, 1).add_filled("b", "U8", {8}, 1);
    gap.header()["b"]["data_offsets"] = {10, 18};
    gap.data().resize(18);
    expect_error([&] { open_bytes(dir, gap.bytes()); }, {"gap", "'b'"});

    SafetensorsWriter trailing = sample();
    trailing.data() += "xyz";
    expect_error([&] { open_bytes(dir, trailing.bytes()); }, {"3 trailing bytes"});

    SafetensorsWriter past_end = sample();
    past_end.data().resize(past_end.data().size() - 1);
    expect_error([&] { open_bytes(dir, past_end.bytes()); }, {"ends at byte", "file has"});
}

}  // namespace
}  // namespace cherenkov::model_data
