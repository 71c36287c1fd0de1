// The source identity a store records (content hashes of config, index and safetensors headers)
// and the comparison `prepare` makes before reusing a store.
#include "store/packer/source_identity.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "store/packer/sha256.h"
#include "support/temp_dir.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
    return std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/" + name;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string sha256_of(std::string_view bytes) {
    Sha256 hash;
    hash.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
    return hash.hex_digest();
}

const SourceFile& file_named(const SourceIdentity& identity, const std::string& name) {
    for (const SourceFile& file : identity.files) {
        if (file.name == name) return file;
    }
    throw std::runtime_error("no " + name);
}

// A copy of a fixture checkpoint, so tests can change it.
std::string copy_fixture(const testing::TempDir& temp, const std::string& form,
                         const std::string& name) {
    std::string target = temp.file(name);
    fs::copy(fixture(form), target, fs::copy_options::recursive);
    return target;
}

TEST(Sha256, MatchesTheFipsExample) {
    EXPECT_EQ(sha256_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(SourceIdentity, HashesConfigIndexAndSafetensorsHeaders) {
    const std::string source = fixture("tiny_c/mlx_q4");
    const SourceIdentity identity = read_source_identity(source, "mlx-affine", "folded");
    ASSERT_EQ(identity.files.size(), 3u);  // config, index, one shard; tokenizer files excluded
    EXPECT_EQ(file_named(identity, "config.json").sha256,
              sha256_of(read_bytes(source + "/config.json")));
    EXPECT_FALSE(file_named(identity, "config.json").header_sha256.has_value());
    EXPECT_EQ(file_named(identity, "model.safetensors.index.json").sha256,
              sha256_of(read_bytes(source + "/model.safetensors.index.json")));
    const std::string weights = read_bytes(source + "/model.safetensors");
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, weights.data(), 8);
    const SourceFile& shard = file_named(identity, "model.safetensors");
    EXPECT_EQ(shard.header_sha256,
              sha256_of(std::string_view(weights).substr(0, 8 + header_bytes)));
    EXPECT_FALSE(shard.sha256.has_value());
    EXPECT_EQ(shard.size_bytes, weights.size());
}

TEST(SourceIdentity, AMovedAndTouchedCopyIsTheSameSource) {
    testing::TempDir temp;
    const SourceIdentity recorded =
        read_source_identity(fixture("tiny_a/hf_flat_fused"), "hf-bf16", "zero_centred");
    const std::string copy = copy_fixture(temp, "tiny_a/hf_flat_fused", "elsewhere");
    fs::last_write_time(copy + "/model.safetensors", fs::file_time_type::clock::now());
    const SourceIdentity current = read_source_identity(copy, "hf-bf16", "zero_centred");
    EXPECT_NE(current.path, recorded.path);
    EXPECT_EQ(source_difference(recorded, current), std::nullopt);
}

TEST(SourceIdentity, NamesWhatDiffers) {
    testing::TempDir temp;
    const std::string copy = copy_fixture(temp, "tiny_c/mlx_q4", "copy");
    const SourceIdentity recorded = read_source_identity(copy, "mlx-affine", "folded");

    // Kind.
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "hf-bf16", "folded")),
              "different kind: hf-bf16, the store's is mlx-affine");

    // config.json content.
    std::ofstream(copy + "/config.json", std::ios::app) << "\n";
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "mlx-affine", "folded")),
              "different config.json");

    // One byte of the safetensors header (the size stays the same).
    fs::copy_file(fixture("tiny_c/mlx_q4/config.json"), copy + "/config.json",
                  fs::copy_options::overwrite_existing);
    {
        std::fstream file(copy + "/model.safetensors",
                          std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(9);
        file.put('"' == read_bytes(copy + "/model.safetensors")[9] ? ' ' : '"');
    }
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "mlx-affine", "folded")),
              "different model.safetensors header");

    // Shards missing or added.
    fs::remove(copy + "/model.safetensors");
    fs::copy_file(fixture("tiny_c/mlx_q4/model.safetensors"), copy + "/model-00002.safetensors");
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "mlx-affine", "folded")),
              "model.safetensors missing; model-00002.safetensors not in the store's source");
}

TEST(SourceIdentity, WithoutRecordedHashesComparesNamesAndSizes) {
    testing::TempDir temp;
    const std::string copy = copy_fixture(temp, "tiny_a/hf_flat_fused", "copy");
    SourceIdentity recorded = read_source_identity(copy, "hf-bf16", "zero_centred");
    for (SourceFile& file : recorded.files) {
        file.sha256.reset();
        file.header_sha256.reset();
    }
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "hf-bf16", "zero_centred")),
              std::nullopt);
    std::ofstream(copy + "/config.json", std::ios::app) << " ";
    EXPECT_EQ(source_difference(recorded, read_source_identity(copy, "hf-bf16", "zero_centred")),
              "different config.json");
}

}  // namespace
}  // namespace cherenkov::store
