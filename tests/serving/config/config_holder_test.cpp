// Reload: only [defaults] and [defaults.sampling] may change; any other change rejects the whole
// reload; an unchanged reload keeps the generation; startup flags are reapplied.
#include "serving/config/config_holder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cherenkov::serving::config {
namespace {

class ConfigHolderTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("cherenkov-config-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
        path_ = (dir_ / "cherenkov.toml").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    void write(const std::string& text) const { std::ofstream(path_) << text; }

    ConfigHolder start(const std::string& text, std::vector<FlagValue> flags = {}) const {
        write(text);
        const ConfigFile file = read_config_file(path_);
        return ConfigHolder(resolve_config(&file, flags), flags);
    }

    std::filesystem::path dir_;
    std::string path_;
};

constexpr const char* kStart =
    "[limits]\nmax_active = 2\n[defaults]\nmax_tokens = 64\n[defaults.sampling]\n"
    "temperature = 0.0\n";

TEST_F(ConfigHolderTest, ADefaultsChangeIsAppliedAndBumpsTheGeneration) {
    ConfigHolder holder = start(kStart);
    EXPECT_EQ(holder.generation(), 1U);
    write(
        "[limits]\nmax_active = 2\n[defaults]\nmax_tokens = 16\n[defaults.sampling]\n"
        "temperature = 0.8\ntop_k = 5\n");
    const nlohmann::json result = holder.reload();
    EXPECT_TRUE(result["ok"]) << result.dump();
    EXPECT_EQ(result["generation"], 2);
    EXPECT_EQ(result["changed"],
              nlohmann::json({"defaults.max_tokens", "defaults.sampling.temperature",
                              "defaults.sampling.top_k"}));
    EXPECT_EQ(holder.defaults().max_tokens, 16);
    EXPECT_FLOAT_EQ(holder.defaults().sampling.temperature, 0.8F);
    EXPECT_EQ(holder.defaults().sampling.top_k, 5);
    EXPECT_EQ(holder.show()["generation"], 2);
    EXPECT_EQ(holder.show()["settings"]["defaults"]["max_tokens"], 16);
}

TEST_F(ConfigHolderTest, AnyOtherChangeRejectsTheWholeReload) {
    ConfigHolder holder = start(kStart);
    write("[limits]\nmax_active = 3\n[server]\nport = 9\n[defaults]\nmax_tokens = 16\n");
    const nlohmann::json result = holder.reload();
    EXPECT_FALSE(result["ok"]);
    EXPECT_EQ(result["generation"], 1);
    const std::string error = result["error"];
    EXPECT_NE(error.find("server.port, limits.max_active"), std::string::npos) << error;
    EXPECT_NE(error.find(path_), std::string::npos) << error;
    // Nothing was applied, [defaults] included.
    EXPECT_EQ(holder.defaults().max_tokens, 64);
    EXPECT_EQ(holder.current().values.limits.max_active, 2);
    EXPECT_EQ(holder.generation(), 1U);
}

TEST_F(ConfigHolderTest, AnUnchangedReloadKeepsTheGeneration) {
    ConfigHolder holder = start(kStart);
    write(std::string("# a comment moves the lines\n\n") + kStart);
    const nlohmann::json result = holder.reload();
    EXPECT_TRUE(result["ok"]);
    EXPECT_EQ(result["generation"], 1);
    EXPECT_TRUE(result["changed"].empty());
}

TEST_F(ConfigHolderTest, StartupFlagsAreReappliedOverTheFile) {
    ConfigHolder holder = start(kStart, {{"defaults.max_tokens", int64_t{100}, "--max-tokens"},
                                         {"limits.max_active", int64_t{5}, "--max-active"}});
    EXPECT_EQ(holder.defaults().max_tokens, 100);
    // The file changes both; the flags still win, so nothing changes and nothing is refused.
    write("[limits]\nmax_active = 7\n[defaults]\nmax_tokens = 16\n");
    const nlohmann::json result = holder.reload();
    EXPECT_TRUE(result["ok"]) << result.dump();
    EXPECT_TRUE(result["changed"].empty());
    EXPECT_EQ(holder.defaults().max_tokens, 100);
}

TEST_F(ConfigHolderTest, AnInvalidFileLeavesTheSettingsIntact) {
    ConfigHolder holder = start(kStart);
    write("[defaults.sampling]\ntemperature = 0.5\n\ntop_p = 7\n");
    const nlohmann::json result = holder.reload();
    EXPECT_FALSE(result["ok"]);
    EXPECT_EQ(result["error"],
              path_ + ":4: defaults.sampling.top_p: must be a number in (0, 1], got 7");
    EXPECT_FLOAT_EQ(holder.defaults().sampling.temperature, 0.0F);
    std::filesystem::remove(path_);
    EXPECT_FALSE(holder.reload()["ok"]);
}

TEST(ConfigHolder, ReloadNeedsAStartupFile) {
    ConfigHolder holder(resolve_config(nullptr, {}), {});
    const nlohmann::json result = holder.reload();
    EXPECT_FALSE(result["ok"]);
    EXPECT_NE(result["error"].get<std::string>().find("needs a configuration file"),
              std::string::npos);
    EXPECT_TRUE(holder.show()["file"].is_null());
}

}  // namespace
}  // namespace cherenkov::serving::config
