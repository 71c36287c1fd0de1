// gguf_report_json / gguf_report_text over GGUF images built in the test.
#include "model_data/inspect/gguf_report.h"

#include <gtest/gtest.h>

#include <limits>

#include "model_data/gguf/gguf_builder.h"
#include "model_data/sources/memory_source.h"

namespace cherenkov::model_data::inspect {
namespace {

using gguf::GgufFile;
using gguf::GgufValueType;
using gguf::testing::array_payload;
using gguf::testing::Bytes;
using gguf::testing::cat;
using gguf::testing::f32;
using gguf::testing::f64;
using gguf::testing::GgufBuilder;
using gguf::testing::gstr;
using gguf::testing::u16;
using gguf::testing::u32;
using gguf::testing::u64;
using gguf::testing::u8;

constexpr uint32_t id(GgufValueType type) {
    return static_cast<uint32_t>(type);
}

GgufFile sample_file() {
    Bytes tokens;
    for (int token = 0; token < 20; ++token) {
        tokens = cat({tokens, gstr(token == 1 ? "\"" : "t" + std::to_string(token))});
    }
    GgufBuilder builder;
    builder.kv("general.architecture", id(GgufValueType::String), gstr("qwen3moe"))
        .kv("general.alignment", id(GgufValueType::Uint32), u32(32))
        .kv("a.u64", id(GgufValueType::Uint64), u64(std::numeric_limits<uint64_t>::max()))
        .kv("a.i8", id(GgufValueType::Int8), u8(0xFB))
        .kv("a.i16", id(GgufValueType::Int16), u16(0x8000))
        .kv("a.f32", id(GgufValueType::Float32), f32(0.1f))
        .kv("a.f64", id(GgufValueType::Float64), f64(0.25))
        .kv("a.bool", id(GgufValueType::Bool), u8(0))
        .kv("a.bad_utf8", id(GgufValueType::String), gstr("ok\xFF"))
        .kv("a.template", id(GgufValueType::String), gstr(std::string(500, 'x')))
        .kv("tokenizer.ggml.tokens", id(GgufValueType::Array),
            array_payload(id(GgufValueType::String), 20, tokens))
        .kv("a.shorts", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Int16), 2, cat({u16(5), u16(0xFFFF)})))
        .kv("a.nested", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Array), 2,
                          cat({array_payload(id(GgufValueType::Uint8), 1, u8(7)),
                               array_payload(id(GgufValueType::Uint8), 0, {})})))
        .kv("a.mixed", id(GgufValueType::Array),
            array_payload(id(GgufValueType::Array), 2,
                          cat({array_payload(id(GgufValueType::Uint8), 0, {}),
                               array_payload(id(GgufValueType::String), 0, {})})));
    builder.tensor({"token_embd.weight", {64, 3}, 8, 0});  // Q8_0: 3 rows x 2 blocks x 34
    builder.tensor({"output_norm.weight", {64}, 0, 224});  // F32
    builder.tensor({"blk.0.attn_q.weight", {64, 2}, 8, 480});
    builder.data = Bytes(480 + 136, std::byte{0});
    const Bytes bytes = builder.build();
    return gguf::read_gguf(*open_memory_source("sample.gguf", bytes));
}

TEST(GgufReport, JsonDescribesEveryField) {
    const GgufFile file = sample_file();
    const nlohmann::json report = gguf_report_json(file);
    EXPECT_EQ(report["format"], "gguf");
    EXPECT_EQ(report["path"], "sample.gguf");
    EXPECT_EQ(report["version"], 3);
    EXPECT_EQ(report["alignment"], 32);
    EXPECT_EQ(report["data_offset"], file.data_offset);
    EXPECT_EQ(report["file_size"], file.file_size);
    EXPECT_EQ(report["architecture"], "qwen3moe");
    EXPECT_EQ(report["engine_support"]["supported"], false);
    EXPECT_NE(report["engine_support"]["reason"].get<std::string>().find("inspection only"),
              std::string::npos);

    const nlohmann::json& metadata = report["metadata"];
    EXPECT_TRUE(metadata["a.u64"].is_number_unsigned());
    EXPECT_EQ(metadata["a.u64"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(metadata["a.i8"], -5);
    EXPECT_EQ(metadata["a.i16"], -32768);
    EXPECT_EQ(metadata["a.f32"].get<double>(), 0.1);  // shortest float32 decimal
    EXPECT_EQ(metadata["a.f64"].get<double>(), 0.25);
    EXPECT_EQ(metadata["a.bool"], false);
    EXPECT_EQ(metadata["a.bad_utf8"], "ok\xEF\xBF\xBD");
    EXPECT_EQ(metadata["tokenizer.ggml.tokens"].size(), 20u);
    EXPECT_EQ(metadata["tokenizer.ggml.tokens"][1], "\"");
    EXPECT_EQ(metadata["a.shorts"], nlohmann::json::array({5, -1}));
    EXPECT_EQ(metadata["a.nested"], nlohmann::json::parse("[[7], []]"));

    const nlohmann::json& types = report["metadata_types"];
    EXPECT_EQ(types["general.alignment"], "uint32");
    EXPECT_EQ(types["a.u64"], "uint64");
    EXPECT_EQ(types["a.f32"], "float32");
    EXPECT_EQ(types["a.bool"], "bool");
    EXPECT_EQ(types["tokenizer.ggml.tokens"], "array[string]");
    EXPECT_EQ(types["a.shorts"], "array[int16]");
    EXPECT_EQ(types["a.nested"], "array[array[uint8]]");
    EXPECT_EQ(types["a.mixed"], "array[array]");
    EXPECT_EQ(types.size(), metadata.size());

    const nlohmann::json& tensors = report["tensors"];
    ASSERT_EQ(tensors.size(), 3u);
    EXPECT_EQ(tensors[0]["name"], "token_embd.weight");
    EXPECT_EQ(tensors[0]["shape"], nlohmann::json::array({3, 64}));
    EXPECT_EQ(tensors[0]["ggml_type"], "Q8_0");
    EXPECT_EQ(tensors[0]["type_id"], 8);
    EXPECT_EQ(tensors[0]["offset"], file.data_offset);
    EXPECT_EQ(tensors[0]["n_bytes"], 204);
    EXPECT_EQ(tensors[1]["ggml_type"], "F32");
    EXPECT_EQ(tensors[1]["offset"], file.data_offset + 224);
    EXPECT_EQ(tensors[1]["relative_offset"], 224);
    EXPECT_EQ(tensors[1]["n_bytes"], 256);
    EXPECT_EQ(tensors[2]["n_elements"], 128);

    // Serializes without throwing, and round-trips.
    EXPECT_EQ(nlohmann::json::parse(report.dump()), report);
}

TEST(GgufReport, TextAbbreviatesLongValues) {
    const std::string text = gguf_report_text(sample_file());
    const auto contains = [&](std::string_view part) {
        EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
    };
    contains("GGUF file sample.gguf");
    contains("version        3");
    contains("architecture   \"qwen3moe\"");
    contains("inspection only");
    contains("[20 strings: \"t0\", \"\\\"\", \"t2\", ...]");
    contains("[5, -1]");
    contains("[[7], []]");
    contains("0.1\n");
    contains("\"ok\\xff\"");
    contains("... (500 bytes)");
    contains("token_embd.weight");
    contains("[3, 64]");
    contains("Q8_0");
    contains("totals by type:");
    contains("2 tensors");
    contains("1 tensor ");
    contains("all");
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find(std::string(100, 'x')), std::string::npos);
}

TEST(GgufReport, EmptyFileHasNoArchitecture) {
    GgufBuilder builder;
    const GgufFile file = gguf::read_gguf(*open_memory_source("empty.gguf", builder.build()));
    const nlohmann::json report = gguf_report_json(file);
    EXPECT_TRUE(report["architecture"].is_null());
    EXPECT_TRUE(report["metadata"].is_object());
    EXPECT_TRUE(report["tensors"].is_array());
    EXPECT_TRUE(report["tensors"].empty());
    EXPECT_NE(gguf_report_text(file).find("(none)"), std::string::npos);
}

}  // namespace
}  // namespace cherenkov::model_data::inspect
