#include "model_data/hub/hub_repo.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "model_data/hub/revision_info.h"

namespace cherenkov::model_data::hub {
namespace {

TEST(HubRepo, RepositoryIds) {
    validate_repo_id("Sawfwair/Qwen3.8-Flash-Next-MLX-4bit", "x");
    validate_repo_id("a/b_c.d-e", "x");
    for (const char* bad :
         {"owner", "owner/", "/repo", "o/r/x", "o/..", "./r", "o/-r", "o/r%20", "o/r?x", "o r/x"}) {
        EXPECT_THROW(validate_repo_id(bad, "x"), Error) << bad;
    }
}

TEST(HubRepo, Revisions) {
    validate_revision("main", "x");
    validate_revision("refs/pr/1", "x");
    validate_revision("feature/branch", "x");
    for (const char* bad : {"", "a//b", "/a", "a/", "a/../b", ".", "a?b", "a#b", "a%2Fb", "a b"}) {
        EXPECT_THROW(validate_revision(bad, "x"), Error) << bad;
    }
}

TEST(HubRepo, RevisionEncodingKeepsNoSafeCharacters) {
    EXPECT_EQ(encode_revision("refs/pr/1"), "refs%2Fpr%2F1");
    EXPECT_EQ(encode_revision("v1.0_rc-2~x"), "v1.0_rc-2~x");
    EXPECT_EQ(encode_revision("a b"), "a%20b");
}

TEST(HubRepo, CacheFolderAndEndpoint) {
    EXPECT_EQ(cache_folder_name("owner/repo"), "models--owner--repo");
    EXPECT_EQ(normalize_endpoint(""), "https://huggingface.co");
    EXPECT_EQ(normalize_endpoint("http://127.0.0.1:8080//"), "http://127.0.0.1:8080");
    EXPECT_THROW(normalize_endpoint("ftp://x"), Error);
    EXPECT_THROW(normalize_endpoint("https://user:secret@hub"), Error);
    EXPECT_THROW(normalize_endpoint("https://hub/?q"), Error);
}

TEST(HubRepo, CommitsAndHex) {
    EXPECT_TRUE(is_full_commit("6cc9bbc0fae9ce26b7670b3ed1e26d557c154506"));
    EXPECT_FALSE(is_full_commit("6cc9bbc0"));
    EXPECT_FALSE(is_hex(""));
}

TEST(RevisionInfo, ParsesCommitFilesAndLfsSizes) {
    const RevisionInfo info = parse_revision_info(R"({
        "sha": "6CC9BBC0FAE9CE26B7670B3ED1E26D557C154506", "gated": "manual", "private": true,
        "siblings": [{"rfilename": "config.json", "size": 120},
                     {"rfilename": "model.safetensors", "size": 133,
                      "lfs": {"sha256": "ab", "size": 1000000, "pointerSize": 133}},
                     {"rfilename": "sub/readme.md"}],
        "extra": {"ignored": true}})",
                                                  "api");
    EXPECT_EQ(info.commit, "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506");
    EXPECT_EQ(info.gated, "manual");
    EXPECT_TRUE(info.is_private);
    ASSERT_EQ(info.files.size(), 3u);
    EXPECT_EQ(info.files[0].size_bytes.value(), 120u);
    EXPECT_EQ(info.files[1].size_bytes.value(), 1000000u);
    EXPECT_FALSE(info.files[2].size_bytes.has_value());
    EXPECT_TRUE(parse_revision_info(R"({"sha": "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506",
                                        "gated": false})",
                                    "api")
                    .gated.empty());
}

TEST(RevisionInfo, RejectsMalformedAnswersNamingTheField) {
    const std::string sha = "\"sha\": \"6cc9bbc0fae9ce26b7670b3ed1e26d557c154506\"";
    const std::pair<std::string, std::string> cases[] = {
        {"not json", "not valid JSON"},
        {"[]", "expected a JSON object"},
        {R"({"sha": "main"})", "'sha'"},
        {"{" + sha + R"(, "siblings": {}})", "'siblings'"},
        {"{" + sha + R"(, "siblings": [{"size": 1}]})", "siblings[0].rfilename"},
        {"{" + sha + R"(, "siblings": [{"rfilename": "../etc/passwd"}]})", "siblings[0]"},
        {"{" + sha + R"(, "siblings": [{"rfilename": "/abs"}]})", "siblings[0]"},
        {"{" + sha + R"(, "siblings": [{"rfilename": "a", "size": -1}]})", "siblings[0].size"},
        {"{" + sha + R"(, "gated": 3})", "'gated'"},
    };
    for (const auto& [text, fragment] : cases) {
        try {
            parse_revision_info(text, "https://hub/api/models/o/r/revision/main");
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
            const std::string message = error.what();
            EXPECT_NE(message.find("https://hub/api/models/o/r/revision/main"), std::string::npos);
            EXPECT_NE(message.find(fragment), std::string::npos) << message;
        }
    }
}

}  // namespace
}  // namespace cherenkov::model_data::hub
