#include "store/index/catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace cherenkov::store {
namespace {

const std::string kCommit = "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506";

Catalog sample_catalog() {
    Catalog catalog;
    catalog.stores.push_back(
        {"0123456789ab", "models", "/srv/models", StoreLayout::HfCache, false});
    ModelEntry hf;
    hf.id = "aaaaaaaaaaaa";
    hf.alias = "small-moe";
    hf.source.kind = SourceKind::Hf;
    hf.source.endpoint = "https://huggingface.co";
    hf.source.repo = "owner/repo";
    hf.source.revision = "feature/x";
    hf.source.commit = kCommit;
    hf.store_artifact = "1111111111111111";
    hf.source_artifact = "2222222222222222";
    hf.description_artifact = "3333333333333333";
    hf.registered_unix = 1700000000;
    ModelEntry disk;
    disk.id = "bbbbbbbbbbbb";
    disk.source.kind = SourceKind::Disk;
    disk.source.store_id = "0123456789ab";
    disk.source.store_name = "models";
    disk.source.repo = "o/r";
    disk.source.commit = kCommit;
    disk.source.path = "/srv/models/models--o--r/snapshots/" + kCommit;
    disk.store_artifact = "4444444444444444";
    catalog.models = {hf, disk};
    catalog.artifacts = {
        {"1111111111111111", ArtifactKind::Store, Ownership::Managed, ArtifactState::Ready, "",
         hf.id},
        {"2222222222222222", ArtifactKind::Source, Ownership::Managed, ArtifactState::Ready, "",
         hf.id},
        {"3333333333333333", ArtifactKind::Description, Ownership::Managed, ArtifactState::Ready,
         "", hf.id},
        {"4444444444444444", ArtifactKind::Store, Ownership::External, ArtifactState::Ready,
         "/exports/r", disk.id},
        {"5555555555555555", ArtifactKind::Store, Ownership::Managed, ArtifactState::Importing, "",
         disk.id},
    };
    return catalog;
}

std::string expect_corrupt(const std::string& text) {
    try {
        parse_catalog(text, "/data/index.json");
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        const std::string message = error.what();
        EXPECT_NE(message.find("/data/index.json"), std::string::npos) << message;
        return message;
    }
    ADD_FAILURE() << "accepted: " << text;
    return {};
}

nlohmann::json sample_json() {
    return nlohmann::json::parse(catalog_to_text(sample_catalog()));
}

TEST(Catalog, RoundTripsThroughJson) {
    const Catalog parsed = parse_catalog(catalog_to_text(sample_catalog()), "index.json");
    ASSERT_EQ(parsed.models.size(), 2u);
    EXPECT_EQ(parsed.models[0].alias, "small-moe");
    EXPECT_EQ(parsed.models[0].source.revision, "feature/x");
    EXPECT_EQ(parsed.models[0].source_artifact, "2222222222222222");
    EXPECT_EQ(parsed.models[1].source.kind, SourceKind::Disk);
    EXPECT_EQ(parsed.stores[0].layout, StoreLayout::HfCache);
    EXPECT_FALSE(parsed.stores[0].enabled);
    ASSERT_EQ(parsed.artifacts.size(), 5u);
    EXPECT_EQ(parsed.artifacts[3].path, "/exports/r");
    EXPECT_EQ(parsed.artifacts[4].state, ArtifactState::Importing);
    EXPECT_EQ(catalog_to_text(parsed), catalog_to_text(sample_catalog()));
}

TEST(Catalog, SourceUris) {
    const Catalog catalog = sample_catalog();
    EXPECT_EQ(source_uri(catalog.models[0].source), "hf://owner/repo@" + kCommit);
    EXPECT_EQ(source_uri(catalog.models[1].source), "disk://models/o/r@" + kCommit);
}

TEST(Catalog, RejectsMalformedDocumentsNamingTheField) {
    EXPECT_NE(expect_corrupt("{").find("not valid JSON"), std::string::npos);
    EXPECT_NE(expect_corrupt("[]").find("expected an object"), std::string::npos);
    nlohmann::json doc = sample_json();
    doc["format"] = "other";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/format"), std::string::npos);
    doc = sample_json();
    doc["version"] = 2;
    EXPECT_NE(expect_corrupt(doc.dump()).find("/version"), std::string::npos);
    doc = sample_json();
    doc["models"][0]["colour"] = "red";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/colour: unknown field"),
              std::string::npos);
    doc = sample_json();
    doc["models"][0]["id"] = "XYZ";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/id"), std::string::npos);
    doc = sample_json();
    doc["models"][0]["source"]["commit"] = "main";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/source/commit"), std::string::npos);
    doc = sample_json();
    doc["models"][0]["source"]["repo"] = "owner/../x";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/source/repo"), std::string::npos);
    doc = sample_json();
    doc["models"][0]["source"]["endpoint"] = "https://user:pw@hub";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/source/endpoint"), std::string::npos);
    doc = sample_json();
    doc["artifacts"][1]["state"] = "half";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/artifacts/1/state"), std::string::npos);
    doc = sample_json();
    doc["artifacts"][3]["path"] = "relative";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/artifacts/3/path"), std::string::npos);
    doc = sample_json();
    doc["artifacts"][0]["path"] = "/elsewhere";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/artifacts/0/path"), std::string::npos);
}

TEST(Catalog, RejectsInconsistentReferences) {
    nlohmann::json doc = sample_json();
    doc["models"][0]["store"] = "9999999999999999";
    EXPECT_NE(expect_corrupt(doc.dump()).find("9999999999999999"), std::string::npos);
    doc = sample_json();
    doc["models"][1]["store"] = "5555555555555555";  // importing, not ready
    EXPECT_NE(expect_corrupt(doc.dump()).find("not a ready store"), std::string::npos);
    doc = sample_json();
    doc["models"][1]["store"] = "2222222222222222";  // a source, not a store
    expect_corrupt(doc.dump());
    doc = sample_json();
    doc["models"][1]["alias"] = "small-moe";
    EXPECT_NE(expect_corrupt(doc.dump()).find("duplicate alias"), std::string::npos);
    doc = sample_json();
    doc["artifacts"][2]["id"] = "1111111111111111";
    EXPECT_NE(expect_corrupt(doc.dump()).find("duplicate ID"), std::string::npos);
    doc = sample_json();
    doc["stores"].push_back(doc["stores"][0]);
    doc["stores"][1]["id"] = "ba9876543210";
    EXPECT_NE(expect_corrupt(doc.dump()).find("duplicate store name"), std::string::npos);
}

TEST(Catalog, AliasesAndStoreNames) {
    validate_alias("small-moe.v2_1", "--name");
    EXPECT_THROW(validate_alias("", "--name"), Error);
    EXPECT_THROW(validate_alias("-x", "--name"), Error);
    EXPECT_THROW(validate_alias("a/b", "--name"), Error);
    EXPECT_THROW(validate_alias("0123456789ab", "--name"), Error);  // the form of a model ID
    EXPECT_THROW(validate_store_name("my store", "store add"), Error);
}

}  // namespace
}  // namespace cherenkov::store

namespace cherenkov::store {
namespace {

// `prepare --output` exports recorded beside a model's store (docs/model-index.md, "Exports").
TEST(Catalog, ExportsAreReadyExternalStoresTheModelReferences) {
    Catalog catalog = sample_catalog();
    catalog.models[0].export_artifacts = {"6666666666666666"};
    catalog.artifacts.push_back({"6666666666666666", ArtifactKind::Store, Ownership::External,
                                 ArtifactState::Ready, "/exports/small", "aaaaaaaaaaaa"});
    const std::string text = catalog_to_text(catalog);
    const Catalog parsed = parse_catalog(text, "index.json");
    EXPECT_EQ(parsed.models[0].export_artifacts, std::vector<std::string>{"6666666666666666"});
    EXPECT_TRUE(parsed.models[1].export_artifacts.empty());
    EXPECT_EQ(catalog_to_text(parsed), text);
    const std::vector<std::string> referenced = parsed.referenced_artifacts();
    EXPECT_NE(std::find(referenced.begin(), referenced.end(), "6666666666666666"),
              referenced.end());

    nlohmann::json doc = nlohmann::json::parse(text);
    doc["models"][0]["exports"] = {"XYZ"};
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/exports/0"), std::string::npos);
    doc = nlohmann::json::parse(text);
    doc["models"][0]["exports"] = {"1111111111111111"};  // the model's managed store
    expect_corrupt(doc.dump());
    doc = nlohmann::json::parse(text);
    doc["models"][0]["exports"] = {"2222222222222222"};  // a source, not a store
    expect_corrupt(doc.dump());
    doc = nlohmann::json::parse(text);
    doc["models"][1]["exports"] = {"6666666666666666"};  // the other model's export as well
    EXPECT_NE(expect_corrupt(doc.dump()).find("referenced twice"), std::string::npos);
    doc = nlohmann::json::parse(text);
    doc["models"][0]["exports"] = "6666666666666666";
    EXPECT_NE(expect_corrupt(doc.dump()).find("/models/0/exports"), std::string::npos);
}

}  // namespace
}  // namespace cherenkov::store
