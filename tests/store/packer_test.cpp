#include "store/packer/packer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "base/half.h"
#include "store/packer/source_model.h"
#include "store/prepare.h"
#include "store/store_check.h"
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

StoreManifest pack(const std::string& source, const std::string& output) {
    PackOptions options;
    options.source_dir = source;
    options.output_dir = output;
    options.n_threads = 2;
    return pack_store(options);
}

std::vector<std::byte> source_bytes(const SourceModel& source, const std::string& name,
                                    uint64_t offset, uint64_t n) {
    const model_data::LocatedTensor tensor = source.require(name);
    std::vector<std::byte> bytes(n);
    tensor.file->read_tensor_bytes(*tensor.tensor, offset, bytes);
    return bytes;
}

std::vector<std::byte> file_range(const std::string& path, uint64_t offset, uint64_t n) {
    const UniqueFd fd = open_read_only(path);
    std::vector<std::byte> bytes(n);
    pread_exact(fd.get(), bytes, offset, path);
    return bytes;
}

class PackedFixtures : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        temp_ = new testing::TempDir();
        bf16_ = pack(fixture("tiny_c/hf_nested_fused"), temp_->file("bf16"));
        mlx_ = pack(fixture("tiny_c/mlx_q4"), temp_->file("mlx"));
    }
    static void TearDownTestSuite() {
        delete temp_;
        temp_ = nullptr;
    }
    static inline testing::TempDir* temp_ = nullptr;
    static inline StoreManifest bf16_;
    static inline StoreManifest mlx_;
};

TEST_F(PackedFixtures, Bf16PackingEqualsMlxFixtureMadeFromSameWeights) {
    for (const char* name : {"experts.bin", "ngram.bin", "dense.bin"}) {
        const std::string a = read_bytes(temp_->file("bf16") + "/" + name);
        const std::string b = read_bytes(temp_->file("mlx") + "/" + name);
        EXPECT_FALSE(a.empty()) << name;
        EXPECT_TRUE(a == b) << name << " differs between BF16 and MLX packing of tiny_c";
    }
    EXPECT_EQ(bf16_.experts, mlx_.experts);
    EXPECT_EQ(bf16_.source.kind, "hf-bf16");
    EXPECT_EQ(mlx_.source.kind, "mlx-affine");
}

TEST_F(PackedFixtures, MlxExpertRecordsEqualSourceBytes) {
    const SourceModel source = open_source_model(fixture("tiny_c/mlx_q4"));
    const ExpertLayout& layout = mlx_.experts;
    const std::string experts = temp_->file("mlx") + "/experts.bin";
    for (int64_t layer = 0; layer < layout.n_trunk_layers; ++layer) {
        for (int64_t expert = 0; expert < layout.n_experts; expert += 5) {
            const std::string prefix = "model.layers." + std::to_string(layer) + ".mlp.switch_mlp.";
            const uint64_t record = layout.record_offset(layer, expert);
            struct Part {
                const char* name;
                const ProjectionLayout* projection;
            };
            for (Part part : {Part{"gate_proj", &layout.gate}, Part{"up_proj", &layout.up},
                              Part{"down_proj", &layout.down}}) {
                const ProjectionLayout& p = *part.projection;
                const auto e = static_cast<uint64_t>(expert);
                EXPECT_EQ(file_range(experts, record + p.codes.offset, p.codes.n_bytes),
                          source_bytes(source, prefix + part.name + ".weight", e * p.codes.n_bytes,
                                       p.codes.n_bytes));
                EXPECT_EQ(file_range(experts, record + p.scales.offset, p.scales.n_bytes),
                          source_bytes(source, prefix + part.name + ".scales", e * p.scales.n_bytes,
                                       p.scales.n_bytes));
                EXPECT_EQ(file_range(experts, record + p.biases.offset, p.biases.n_bytes),
                          source_bytes(source, prefix + part.name + ".biases", e * p.biases.n_bytes,
                                       p.biases.n_bytes));
            }
        }
    }
}

float read_f32(const std::string& path, uint64_t offset) {
    const std::vector<std::byte> bytes = file_range(path, offset, 4);
    float value = 0;
    std::memcpy(&value, bytes.data(), 4);
    return value;
}

TEST_F(PackedFixtures, FoldsOnePlusNormsButNotTheGatedGdnNorm) {
    const SourceModel source = open_source_model(fixture("tiny_c/hf_nested_fused"));
    const std::string dense = temp_->file("bf16") + "/dense.bin";
    auto check = [&](const std::string& store_name, const std::string& source_name, float offset) {
        const DenseTensor* tensor = bf16_.find_dense(store_name);
        ASSERT_NE(tensor, nullptr) << store_name;
        EXPECT_EQ(tensor->encoding, DenseEncoding::F32);
        const std::vector<std::byte> raw = source_bytes(source, source_name, 0, 4);
        uint16_t bits = 0;
        std::memcpy(&bits, &raw[2], 2);
        EXPECT_EQ(read_f32(dense, tensor->data.offset + 4), offset + bf16_to_float(bits))
            << store_name;
    };
    check("model.layers.0.self_attn.q_norm.weight",
          "model.language_model.layers.0.self_attn.q_norm.weight", 1.0f);
    check("model.layers.0.attn_hyper_connection.hc_norm.weight",
          "model.language_model.layers.0.attn_hyper_connection.hc_norm.weight", 1.0f);
    check("model.layers.1.ple.norm_key.weight", "model.language_model.layers.1.ple.norm_key.weight",
          1.0f);
    check("model.layers.1.linear_attn.norm.weight",
          "model.language_model.layers.1.linear_attn.norm.weight", 0.0f);
    check("model.layers.0.mlp.gate.weight", "model.language_model.layers.0.mlp.gate.weight", 0.0f);
    EXPECT_TRUE(bf16_.norms_folded);
    const DenseTensor* conv = bf16_.find_dense("model.layers.1.linear_attn.conv1d.weight");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->shape.size(), 2u);
    const DenseTensor* q_proj = bf16_.find_dense("model.layers.0.self_attn.q_proj.weight");
    ASSERT_NE(q_proj, nullptr);
    EXPECT_EQ(q_proj->encoding, DenseEncoding::Affine);
    EXPECT_EQ(q_proj->group_size, 64);
}

TEST(Packer, PacksEveryFixtureFormAndValidates) {
    testing::TempDir temp;
    const std::pair<const char*, bool> forms[] = {{"tiny_a/hf_flat_fused", true},
                                                  {"tiny_b/hf_nested_experts_sharded", false}};
    for (const auto& [form, mtp] : forms) {
        const std::string output = temp.file(fs::path(form).parent_path().string());
        const StoreManifest manifest = pack(fixture(form), output);
        EXPECT_EQ(manifest.has_mtp, mtp) << form;
        const StoreManifest validated = validate_store(output);
        EXPECT_EQ(validated.experts, manifest.experts);
        const nlohmann::json config = nlohmann::json::parse(read_bytes(output + "/config.json"));
        const nlohmann::json& text =
            config.contains("text_config") ? config["text_config"] : config;
        EXPECT_EQ(text["mtp_num_hidden_layers"].get<int>(), mtp ? 1 : 0) << form;
        EXPECT_TRUE(fs::exists(output + "/tokenizer.json"));
        EXPECT_TRUE(fs::exists(output + "/chat_template.jinja"));
    }
}

TEST(Packer, RefusesExistingDestinationAndLeavesNoPartials) {
    testing::TempDir temp;
    fs::create_directory(temp.file("out"));
    EXPECT_THROW(pack(fixture("tiny_c/hf_nested_fused"), temp.file("out")), Error);
    EXPECT_THROW(pack(temp.file("missing-source"), temp.file("out2")), Error);
    for (const auto& entry : fs::directory_iterator(temp.path())) {
        EXPECT_EQ(entry.path().filename().string().find(".partial-"), std::string::npos);
    }
}

class CorruptStore : public ::testing::Test {
protected:
    void SetUp() override { pack(fixture("tiny_c/hf_nested_fused"), store_); }
    void expect_invalid(const std::string& fragment) {
        try {
            validate_store(store_);
            FAIL() << "accepted a corrupt store";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
        }
    }
    testing::TempDir temp_;
    std::string store_ = temp_.file("store");
};

TEST_F(CorruptStore, DetectsTruncatedExperts) {
    fs::resize_file(store_ + "/experts.bin", fs::file_size(store_ + "/experts.bin") - 4096);
    expect_invalid("truncated");
}

TEST_F(CorruptStore, DetectsBadManifestJson) {
    std::ofstream(store_ + "/manifest.json") << "{\"format\": \"cherenkov-store\",";
    expect_invalid("not valid JSON");
}

TEST_F(CorruptStore, DetectsWrongDenseSize) {
    fs::resize_file(store_ + "/dense.bin", fs::file_size(store_ + "/dense.bin") + 64);
    expect_invalid("dense.bin");
}

TEST_F(CorruptStore, DetectsGarbageRecords) {
    const std::string path = store_ + "/experts.bin";
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    const ExpertLayout layout = validate_store(store_).experts;
    file.seekp(static_cast<std::streamoff>(layout.gate.scales.offset));
    const char nan_bf16[2] = {static_cast<char>(0xc0), static_cast<char>(0x7f)};
    file.write(nan_bf16, 2);
    file.close();
    expect_invalid("non-finite");
}

TEST(Prepare, ParsesExpertWidths) {
    EXPECT_EQ(parse_expert_bits({"4,3", "2"}), (std::vector<int>{4, 3, 2}));
    EXPECT_EQ(parse_expert_bits({"3 2"}), (std::vector<int>{3, 2}));
    EXPECT_EQ(parse_expert_bits({}), (std::vector<int>{4}));
    EXPECT_THROW(parse_expert_bits({"4,5"}), Error);
}

TEST(Prepare, DerivesLowBitOnceAndReusesStores) {
    testing::TempDir temp;
    PrepareOptions options;
    options.source_dir = fixture("tiny_a/hf_flat_fused");
    options.output_dir = temp.file("store");
    options.expert_bits = {3};
    PrepareResult first = prepare_store(options);
    EXPECT_TRUE(first.base_packed);
    EXPECT_EQ(first.derived, (std::vector<int>{3}));
    EXPECT_FALSE(fs::exists(options.output_dir + "/experts2.bin"));
    const auto stamp = fs::last_write_time(options.output_dir + "/experts3.bin");
    options.expert_bits = {4, 3, 2};
    PrepareResult second = prepare_store(options);
    EXPECT_FALSE(second.base_packed);
    EXPECT_EQ(second.reused, (std::vector<int>{3}));
    EXPECT_EQ(second.derived, (std::vector<int>{2}));
    EXPECT_EQ(fs::last_write_time(options.output_dir + "/experts3.bin"), stamp);
    const StoreManifest base = validate_store(options.output_dir);
    EXPECT_EQ(validate_lowbit_store(options.output_dir, 2, base).experts.bits, 2);
    // A corrupt low-bit table is rebuilt, the base is kept.
    fs::resize_file(options.output_dir + "/experts2.bin", 4096);
    options.expert_bits = {2};
    PrepareResult third = prepare_store(options);
    EXPECT_EQ(third.derived, (std::vector<int>{2}));
    EXPECT_NO_THROW(validate_lowbit_store(options.output_dir, 2, base));
}

TEST(Prepare, ReusesAStoreForAMovedCopyOfItsSource) {
    testing::TempDir temp;
    const std::string copy = temp.file("checkpoint");
    fs::copy(fixture("tiny_a/hf_flat_fused"), copy, fs::copy_options::recursive);
    PrepareOptions options;
    options.source_dir = fixture("tiny_a/hf_flat_fused");
    options.output_dir = temp.file("store");
    EXPECT_TRUE(prepare_store(options).base_packed);
    const StoreManifest packed = validate_store(options.output_dir);
    for (const SourceFile& file : packed.source.files) {
        EXPECT_TRUE(file.sha256.has_value() || file.header_sha256.has_value()) << file.name;
    }
    options.source_dir = copy;
    fs::last_write_time(copy + "/config.json", fs::file_time_type::clock::now());
    const PrepareResult again = prepare_store(options);
    EXPECT_FALSE(again.base_packed);
    EXPECT_EQ(again.manifest.source.path, packed.source.path);  // the store is not rewritten
}

TEST(Prepare, RefusesAStorePackedFromAnotherSource) {
    testing::TempDir temp;
    PrepareOptions options;
    options.source_dir = fixture("tiny_c/hf_nested_fused");
    options.output_dir = temp.file("store");
    prepare_store(options);
    const std::string manifest_before = read_bytes(options.output_dir + "/manifest.json");
    const std::pair<const char*, const char*> others[] = {
        {"tiny_c/mlx_q4", "different kind: mlx-affine, the store's is hf-bf16"},
        {"tiny_a/hf_flat_fused", "different config.json"},
    };
    for (const auto& [other, difference] : others) {
        options.source_dir = fixture(other);
        options.expert_bits = {4, 3};
        try {
            prepare_store(options);
            FAIL() << "reused a store packed from another source: " << other;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
            const std::string message = error.what();
            EXPECT_NE(
                message.find(
                    "existing store " + options.output_dir + " was packed from " +
                    fs::absolute(fixture("tiny_c/hf_nested_fused")).lexically_normal().string()),
                std::string::npos)
                << message;
            EXPECT_NE(message.find(difference), std::string::npos) << message;
            EXPECT_NE(message.find("remove it or choose another --output"), std::string::npos);
        }
    }
    EXPECT_EQ(read_bytes(options.output_dir + "/manifest.json"), manifest_before);
    EXPECT_FALSE(fs::exists(options.output_dir + "/experts3.bin"));
}

TEST(Prepare, ReusesAStoreWhoseManifestPredatesHashes) {
    testing::TempDir temp;
    PrepareOptions options;
    options.source_dir = fixture("tiny_a/hf_flat_fused");
    options.output_dir = temp.file("store");
    prepare_store(options);
    const std::string path = options.output_dir + "/manifest.json";
    nlohmann::json manifest = nlohmann::json::parse(read_bytes(path));
    for (nlohmann::json& file : manifest["source"]["files"]) {
        file.erase("sha256");
        file.erase("header_sha256");
    }
    std::ofstream(path) << manifest.dump(1);
    EXPECT_FALSE(prepare_store(options).base_packed);
    options.source_dir = fixture("tiny_b/hf_nested_experts_sharded");
    EXPECT_THROW(prepare_store(options), Error);
}

}  // namespace
}  // namespace cherenkov::store
