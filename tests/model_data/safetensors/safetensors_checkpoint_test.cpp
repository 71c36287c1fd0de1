#include "model_data/safetensors/safetensors_checkpoint.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/safetensors_writer.h"
#include "support/temp_dir.h"

namespace cherenkov::model_data {
namespace {

using cherenkov::testing::SafetensorsWriter;
using cherenkov::testing::TempDir;
using nlohmann::json;

void write_sharded(const TempDir& dir, const json& weight_map) {
    SafetensorsWriter first;
    first.add_filled("model.a", "BF16", {2, 4}, 2).add_filled("model.b", "F32", {3}, 4);
    SafetensorsWriter second;
    second.add_filled("model.c", "U32", {2, 2}, 4);
    dir.write("model-00001-of-00002.safetensors", first.bytes());
    dir.write("model-00002-of-00002.safetensors", second.bytes());
    dir.write("model.safetensors.index.json", json{{"metadata", {{"total_size", 16 + 12 + 16}}}, {"weight_map", weight_map}}.dump());
}

json good_map() {
    return json{{"model.a", "model-00001-of-00002.safetensors"},
                {"model.b", "model-00001-of-00002.safetensors"},
                {"model.c", "model-00002-of-00002.safetensors"}};
}

TEST(SafetensorsCheckpoint, OpensShardsThroughTheIndex) {
    TempDir dir;
    write_sharded(dir, good_map());
    auto store = open_directory_store(dir.path().string());
    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(*store);
    EXPECT_EQ(checkpoint.files().size(), 2u);
    EXPECT_EQ(checkpoint.n_tensors(), 3u);
    auto located = checkpoint.find("model.c");
    ASSERT_TRUE(located.has_value());
    EXPECT_NE(located->file->name().find("00002"), std::string::npos);
    EXPECT_TRUE(checkpoint.warnings().empty());
}

TEST(SafetensorsCheckpoint, WarnsAboutStrayShardsAndTotalSize) {
    TempDir dir;
    write_sharded(dir, good_map());
    dir.write("model-mtp.safetensors", SafetensorsWriter().add_filled("mtp.x", "U8", {2}, 1).bytes());
    dir.write("model.safetensors.index.json", json{{"metadata", {{"total_size", 1}}}, {"weight_map", good_map()}}.dump());
    auto store = open_directory_store(dir.path().string());
    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(*store);
    ASSERT_EQ(checkpoint.warnings().size(), 2u);
    EXPECT_NE(checkpoint.warnings()[0].find("total_size"), std::string::npos);
    EXPECT_NE(checkpoint.warnings()[1].find("model-mtp.safetensors"), std::string::npos);
}

TEST(SafetensorsCheckpoint, RejectsIndexThatDisagreesWithShards) {
    TempDir dir;
    json wrong_shard = good_map();
    wrong_shard["model.b"] = "model-00002-of-00002.safetensors";
    write_sharded(dir, wrong_shard);
    auto store = open_directory_store(dir.path().string());
    EXPECT_THROW(SafetensorsCheckpoint::open(*store), Error);

    TempDir missing_dir;
    json missing = good_map();
    missing["model.z"] = "model-00002-of-00002.safetensors";
    write_sharded(missing_dir, missing);
    auto missing_store = open_directory_store(missing_dir.path().string());
    try {
        SafetensorsCheckpoint::open(*missing_store);
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("model.z"), std::string::npos) << error.what();
    }
}

TEST(SafetensorsCheckpoint, RejectsUnsafeShardNamesAndMissingShards) {
    TempDir dir;
    json escape = good_map();
    escape["model.c"] = "../outside.safetensors";
    write_sharded(dir, escape);
    auto store = open_directory_store(dir.path().string());
    EXPECT_THROW(SafetensorsCheckpoint::open(*store), Error);

    TempDir absent;
    json map = good_map();
    map["model.c"] = "model-00003-of-00003.safetensors";
    write_sharded(absent, map);
    auto absent_store = open_directory_store(absent.path().string());
    try {
        SafetensorsCheckpoint::open(*absent_store);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(error.what()).find("model-00003-of-00003.safetensors"), std::string::npos);
    }
}

TEST(SafetensorsCheckpoint, FallsBackToSingleFileAndGlob) {
    TempDir single;
    single.write("model.safetensors", SafetensorsWriter().add_filled("x", "U8", {2}, 1).bytes());
    auto store = open_directory_store(single.path().string());
    EXPECT_EQ(SafetensorsCheckpoint::open(*store).n_tensors(), 1u);

    TempDir globbed;
    globbed.write("b.safetensors", SafetensorsWriter().add_filled("y", "U8", {2}, 1).bytes());
    globbed.write("a.safetensors", SafetensorsWriter().add_filled("x", "U8", {2}, 1).bytes());
    auto globbed_store = open_directory_store(globbed.path().string());
    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(*globbed_store);
    ASSERT_EQ(checkpoint.files().size(), 2u);
    EXPECT_NE(checkpoint.files()[0].name().find("a.safetensors"), std::string::npos);

    TempDir empty;
    auto empty_store = open_directory_store(empty.path().string());
    EXPECT_THROW(SafetensorsCheckpoint::open(*empty_store), Error);
}

TEST(SafetensorsCheckpoint, RejectsDuplicateTensorsAcrossShards) {
    TempDir dir;
    dir.write("a.safetensors", SafetensorsWriter().add_filled("x", "U8", {2}, 1).bytes());
    dir.write("b.safetensors", SafetensorsWriter().add_filled("x", "U8", {2}, 1).bytes());
    auto store = open_directory_store(dir.path().string());
    EXPECT_THROW(SafetensorsCheckpoint::open(*store), Error);
}

TEST(ShardIndex, RejectsMalformedIndexFiles) {
    EXPECT_THROW(parse_shard_index("not json", "idx.json"), Error);
    EXPECT_THROW(parse_shard_index("{}", "idx.json"), Error);
    EXPECT_THROW(parse_shard_index(R"({"weight_map": {}})", "idx.json"), Error);
    EXPECT_THROW(parse_shard_index(R"({"weight_map": {"a": 3}})", "idx.json"), Error);
    EXPECT_THROW(parse_shard_index(R"({"weight_map": {"a": "x"}, "metadata": {"total_size": -1}})", "idx.json"), Error);
    ShardIndex index = parse_shard_index(R"({"weight_map": {"b": "s2", "a": "s1", "c": "s2"}})", "idx.json");
    EXPECT_EQ(index.shard_names, (std::vector<std::string>{"s1", "s2"}));
}

}  // namespace
}  // namespace cherenkov::model_data
