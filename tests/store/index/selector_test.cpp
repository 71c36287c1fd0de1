#include "store/index/selector.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::store {
namespace {

void expect_rejected(const std::string& text, const std::string& fragment) {
    try {
        parse_selector(text);
        FAIL() << text << " was accepted";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput) << text;
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
            << text << ": " << error.what();
    }
}

TEST(Selector, BareNamesAreNames) {
    const Selector selector = parse_selector("small-moe");
    EXPECT_EQ(selector.kind, SelectorKind::Name);
    EXPECT_EQ(selector.name, "small-moe");
    EXPECT_EQ(parse_selector("model:small-moe").name, "small-moe");
    EXPECT_EQ(parse_selector("6cc9bbc0").kind, SelectorKind::Name);
}

TEST(Selector, HfUrisWithAndWithoutRevision) {
    Selector selector = parse_selector("hf://owner/repo");
    ASSERT_EQ(selector.kind, SelectorKind::Hf);
    EXPECT_EQ(selector.hf.repo, "owner/repo");
    EXPECT_FALSE(selector.hf.revision.has_value());
    selector = parse_selector("hf://Owner-1/Repo.Name_2@feature/branch");
    EXPECT_EQ(selector.hf.repo, "Owner-1/Repo.Name_2");
    EXPECT_EQ(selector.hf.revision.value(), "feature/branch");
    selector = parse_selector("hf://o/r@refs/pr/1");
    EXPECT_EQ(selector.hf.revision.value(), "refs/pr/1");
}

TEST(Selector, DiskUris) {
    const Selector selector = parse_selector("disk://models/owner/repo@0123abcd");
    ASSERT_EQ(selector.kind, SelectorKind::Disk);
    EXPECT_EQ(selector.disk.store, "models");
    EXPECT_EQ(selector.disk.repo, "owner/repo");
    EXPECT_EQ(selector.disk.revision.value(), "0123abcd");
    EXPECT_FALSE(parse_selector("disk://m/o/r").disk.revision.has_value());
}

TEST(Selector, PathsAndUrls) {
    EXPECT_EQ(parse_selector("/abs/dir").kind, SelectorKind::Path);
    EXPECT_EQ(parse_selector("./dir").kind, SelectorKind::Path);
    EXPECT_EQ(parse_selector("rel/dir with space").kind, SelectorKind::Path);
    EXPECT_EQ(parse_selector("..").kind, SelectorKind::Path);
    EXPECT_EQ(parse_selector("https://host/x").kind, SelectorKind::Url);
}

TEST(Selector, RejectsQueriesFragmentsEscapesAndDotSegments) {
    expect_rejected("hf://owner/repo?x=1", "queries");
    expect_rejected("hf://owner/repo#main", "fragments");
    expect_rejected("hf://owner/re%70o", "percent-escapes");
    expect_rejected("hf://owner/..", "dot segments");
    expect_rejected("hf://./repo", "dot segments");
    expect_rejected("hf://owner/repo@feature/../main", "'..'");
    expect_rejected("hf://owner/repo@", "empty revision");
    expect_rejected("hf://owner/repo@a//b", "empty");
    expect_rejected("hf://owner/repo/extra", "exactly one '/'");
    expect_rejected("hf://owner", "exactly one '/'");
    expect_rejected("hf://owner/re po", "spaces");
    expect_rejected("disk://../owner/repo", "dot segments");
    expect_rejected("disk://models", "disk://STORE/owner/repo");
    expect_rejected("s3://bucket/x", "unknown scheme");
    expect_rejected("", "empty");
    expect_rejected("model:", "model:NAME");
}

TEST(Selector, CommitPrefixesNeedEightHexDigits) {
    EXPECT_TRUE(is_commit_prefix("6cc9bbc0"));
    EXPECT_TRUE(is_commit_prefix("6CC9BBC0FAE9"));
    EXPECT_FALSE(is_commit_prefix("6cc9bbc"));
    EXPECT_FALSE(is_commit_prefix("6cc9bbcz"));
    EXPECT_FALSE(is_commit_prefix(std::string(41, 'a')));
}

TEST(Selector, CacheRefs) {
    EXPECT_EQ(parse_cache_ref("6CC9BBC0FAE9CE26B7670B3ED1E26D557C154506\n", "refs/main"),
              "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506");
    try {
        parse_cache_ref("main", "/cache/refs/main");
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find("/cache/refs/main"), std::string::npos);
    }
}

}  // namespace
}  // namespace cherenkov::store
