#include "store/manifest/store_manifest.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::store {
namespace {

StoreManifest sample_manifest() {
    StoreManifest manifest;
    SourceFile config{"config.json", 100, 5, std::string(64, 'a'), std::nullopt};
    SourceFile shard{"model.safetensors", 4000, 6, std::nullopt, std::string(64, 'b')};
    manifest.source = {"/models/x", "hf-bf16", "zero_centred", {config, shard}};
    manifest.experts = make_expert_layout(64, 64, 4, 64, 2, 1, 4);
    manifest.has_mtp = true;
    manifest.experts_bytes = manifest.experts.file_bytes();
    DenseTensor norm{
        "model.layers.0.self_attn.q_norm.weight", DenseEncoding::F32, {32}, 0, 0, {0, 128}, {}, {}};
    DenseTensor proj{"model.layers.0.self_attn.q_proj.weight",
                     DenseEncoding::Affine,
                     {128, 64},
                     4,
                     64,
                     {128, 4096},
                     {4224, 256},
                     {4480, 256}};
    manifest.dense = {norm, proj};
    manifest.dense_bytes = 4736;
    manifest.ngram.push_back({1, 10, 32, 4, 32, 20, {0, 200}});
    manifest.ngram_bytes = 256;
    return manifest;
}

TEST(StoreManifest, RoundTripsThroughJson) {
    const StoreManifest manifest = sample_manifest();
    const StoreManifest parsed =
        parse_store_manifest(manifest_to_json(manifest).dump(), "manifest.json");
    EXPECT_EQ(parsed.experts, manifest.experts);
    ASSERT_EQ(parsed.dense.size(), 2u);
    EXPECT_EQ(parsed.dense[1].scales, manifest.dense[1].scales);
    EXPECT_EQ(parsed.ngram[0].row_bytes, 20u);
    EXPECT_EQ(parsed.source.files[0].name, "config.json");
    EXPECT_EQ(parsed.source.files[0].sha256, std::string(64, 'a'));
    EXPECT_EQ(parsed.source.files[0].header_sha256, std::nullopt);
    EXPECT_EQ(parsed.source.files[1].header_sha256, std::string(64, 'b'));
    EXPECT_EQ(parsed.source.files[1].sha256, std::nullopt);
    EXPECT_NE(parsed.find_dense("model.layers.0.self_attn.q_norm.weight"), nullptr);
}

void expect_corrupt(const nlohmann::json& document, const std::string& fragment) {
    try {
        parse_store_manifest(document.dump(), "store/manifest.json");
        FAIL() << "accepted a bad manifest, expected " << fragment;
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("store/manifest.json"), std::string::npos)
            << error.what();
    }
}

TEST(StoreManifest, ParsesSourceFilesWithoutHashes) {
    nlohmann::json document = manifest_to_json(sample_manifest());
    for (nlohmann::json& file : document["source"]["files"]) {
        file.erase("sha256");
        file.erase("header_sha256");
    }
    const StoreManifest parsed = parse_store_manifest(document.dump(), "manifest.json");
    ASSERT_EQ(parsed.source.files.size(), 2u);
    EXPECT_EQ(parsed.source.files[0].sha256, std::nullopt);
    EXPECT_EQ(parsed.source.files[1].header_sha256, std::nullopt);
    EXPECT_EQ(parsed.source.files[1].size_bytes, 4000u);
}

TEST(StoreManifest, RejectsMalformedHashes) {
    nlohmann::json document = manifest_to_json(sample_manifest());
    document["source"]["files"][0]["sha256"] = "ABC";
    expect_corrupt(document, "source.files[0].sha256: expected 64 lowercase hex digits");
    document = manifest_to_json(sample_manifest());
    document["source"]["files"][1]["header_sha256"] = 5;
    expect_corrupt(document, "source.files[1].header_sha256: expected a string");
}

TEST(StoreManifest, RejectsBadJsonAndFormat) {
    EXPECT_THROW(parse_store_manifest("{not json", "manifest.json"), Error);
    nlohmann::json document = manifest_to_json(sample_manifest());
    document["format"] = "something-else";
    expect_corrupt(document, "format");
    document = manifest_to_json(sample_manifest());
    document["version"] = 99;
    expect_corrupt(document, "version");
    document = manifest_to_json(sample_manifest());
    document.erase("experts");
    expect_corrupt(document, "experts: missing");
}

TEST(StoreManifest, RejectsInconsistentSizes) {
    nlohmann::json document = manifest_to_json(sample_manifest());
    document["files"]["experts.bin"] = 4096;
    expect_corrupt(document, "experts.bin");
    document = manifest_to_json(sample_manifest());
    document["experts"]["record_bytes"] = 3 * 4096;
    expect_corrupt(document, "record layout");
    document = manifest_to_json(sample_manifest());
    document["dense"][1]["data"] = nlohmann::json::array({128, 100});
    expect_corrupt(document, "dense[1].data");
    document = manifest_to_json(sample_manifest());
    document["files"]["dense.bin"] = 1000;
    expect_corrupt(document, "past the end of dense.bin");
    document = manifest_to_json(sample_manifest());
    document["ngram"][0]["group_size"] = 64;
    expect_corrupt(document, "ngram[0]");
}

TEST(LowBitManifest, RoundTripsAndChecksBits) {
    LowBitManifest manifest;
    manifest.bits = 3;
    manifest.experts_file = lowbit_experts_name(3);
    manifest.experts = make_expert_layout(64, 64, 3, 64, 2, 0, 4);
    manifest.experts_bytes = manifest.experts.file_bytes();
    manifest.base_experts_bytes = 12345;
    const LowBitManifest parsed =
        parse_lowbit_manifest(lowbit_manifest_to_json(manifest).dump(), "manifest3.json");
    EXPECT_EQ(parsed.experts, manifest.experts);
    nlohmann::json document = lowbit_manifest_to_json(manifest);
    document["bits"] = 2;
    EXPECT_THROW(parse_lowbit_manifest(document.dump(), "manifest3.json"), Error);
}

}  // namespace
}  // namespace cherenkov::store
