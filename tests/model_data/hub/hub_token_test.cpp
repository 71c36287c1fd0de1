#include "model_data/hub/hub_token.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cherenkov::model_data::hub {
namespace {

namespace fs = std::filesystem;

class HubToken : public ::testing::Test {
protected:
    HubToken() {
        dir_ = fs::temp_directory_path() / ("cherenkov_token_test_" + std::to_string(::getpid()));
        fs::create_directories(dir_ / "hf");
        std::ofstream(dir_ / "hf" / "token") << "  file-token\r\n";
        std::ofstream(dir_ / "custom") << "custom-token\n";
    }
    ~HubToken() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(HubToken, PrecedenceFlagThenEnvironmentThenFiles) {
    TokenEnvironment env;
    env.hf_home = (dir_ / "hf").string();
    env.hf_token_path = (dir_ / "custom").string();
    env.hugging_face_hub_token = "legacy";
    env.hf_token = " env-token ";
    EXPECT_EQ(resolve_token("flag-token", env), "flag-token");
    EXPECT_EQ(resolve_token("", env), "env-token");
    env.hf_token.clear();
    EXPECT_EQ(resolve_token("", env), "legacy");
    env.hugging_face_hub_token.clear();
    EXPECT_EQ(resolve_token("", env), "custom-token");
    env.hf_token_path.clear();
    EXPECT_EQ(resolve_token("", env), "file-token");
}

TEST_F(HubToken, HfHomeDefaultsFollowXdgCacheThenHome) {
    TokenEnvironment env;
    env.xdg_cache_home = dir_.string();
    fs::rename(dir_ / "hf", dir_ / "huggingface");
    EXPECT_EQ(resolve_token("", env), "file-token");
    env.xdg_cache_home.clear();
    env.home = (dir_ / "nowhere").string();
    EXPECT_EQ(resolve_token("", env), "");  // a missing token file means no token
    EXPECT_EQ(resolve_token("   ", TokenEnvironment{}), "");
}

}  // namespace
}  // namespace cherenkov::model_data::hub
