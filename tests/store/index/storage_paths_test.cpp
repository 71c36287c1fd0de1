#include "store/index/storage_paths.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"

namespace cherenkov::store {
namespace {

PathEnvironment home_only() {
    PathEnvironment env;
    env.home = "/home/ada";
    env.cwd = "/work";
    return env;
}

TEST(StoragePaths, DefaultsFollowXdgUnderHome) {
    const StoragePaths paths = resolve_storage_paths("", home_only());
    EXPECT_EQ(paths.data, "/home/ada/.local/share/cherenkov");
    EXPECT_EQ(paths.scratch, "/home/ada/.cache/cherenkov");
    EXPECT_EQ(paths.config, "/home/ada/.config/cherenkov/cherenkov.toml");
    EXPECT_EQ(paths.index_file(), "/home/ada/.local/share/cherenkov/index.json");
    EXPECT_EQ(paths.lock_file(), "/home/ada/.local/share/cherenkov/index.lock");
    EXPECT_EQ(paths.artifact_dir("ab"), "/home/ada/.local/share/cherenkov/artifacts/ab");
    EXPECT_EQ(paths.lease_file("ab"), "/home/ada/.local/share/cherenkov/leases/ab");
}

TEST(StoragePaths, AbsoluteXdgValuesGetCherenkovAppended) {
    PathEnvironment env = home_only();
    env.xdg_data_home = "/srv/data/";
    env.xdg_cache_home = "/srv/cache";
    env.xdg_config_home = "/etc/xdg";
    const StoragePaths paths = resolve_storage_paths("", env);
    EXPECT_EQ(paths.data, "/srv/data/cherenkov");
    EXPECT_EQ(paths.scratch, "/srv/cache/cherenkov");
    EXPECT_EQ(paths.config, "/etc/xdg/cherenkov/cherenkov.toml");
}

TEST(StoragePaths, RelativeOrEmptyXdgValuesAreIgnored) {
    PathEnvironment env = home_only();
    env.xdg_data_home = "relative/data";
    env.xdg_cache_home = "";
    env.xdg_config_home = "./config";
    const StoragePaths paths = resolve_storage_paths("", env);
    EXPECT_EQ(paths.data, "/home/ada/.local/share/cherenkov");
    EXPECT_EQ(paths.scratch, "/home/ada/.cache/cherenkov");
    EXPECT_EQ(paths.config, "/home/ada/.config/cherenkov/cherenkov.toml");
}

TEST(StoragePaths, RootPutsEverythingUnderOneDirectory) {
    PathEnvironment env = home_only();
    env.xdg_data_home = "/srv/data";
    StoragePaths paths = resolve_storage_paths("/models/ck/", env);
    EXPECT_EQ(paths.data, "/models/ck");
    EXPECT_EQ(paths.scratch, "/models/ck/scratch");
    EXPECT_EQ(paths.config, "/models/ck/cherenkov.toml");
    paths = resolve_storage_paths("rel/../ck", env);
    EXPECT_EQ(paths.data, "/work/ck");
}

TEST(StoragePaths, WithoutHomeOrXdgAskForRoot) {
    PathEnvironment env;
    try {
        resolve_storage_paths("", env);
        FAIL() << "expected an error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("--root"), std::string::npos);
    }
}

TEST(StoragePaths, ResolvingCreatesNothing) {
    const auto base = std::filesystem::temp_directory_path() / "cherenkov_paths_test_nothing";
    std::filesystem::remove_all(base);
    PathEnvironment env;
    env.xdg_data_home = base.string();
    env.xdg_cache_home = base.string();
    env.xdg_config_home = base.string();
    resolve_storage_paths("", env);
    resolve_storage_paths((base / "root").string(), env);
    EXPECT_FALSE(std::filesystem::exists(base));
}

TEST(StoragePaths, DefaultModelIsPinned) {
    EXPECT_EQ(default_model_reference(),
              "hf://Sawfwair/Qwen3.8-Flash-Next-MLX-4bit@6cc9bbc0fae9ce26b7670b3ed1e26d557c154506");
    EXPECT_EQ(resolve_storage_paths("/r", home_only()).downloaded_model("o/n"), "/r/downloads/o/n");
}

}  // namespace
}  // namespace cherenkov::store
