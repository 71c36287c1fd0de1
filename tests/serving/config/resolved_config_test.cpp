// Precedence (defaults < file < explicit flags), sources, invalid combinations, and the printed
// settings reading back as the same configuration.
#include "serving/config/resolved_config.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "serving/config/settings_report.h"

namespace cherenkov::serving::config {
namespace {

std::string error_of(const ConfigFile* file, const std::vector<FlagValue>& flags) {
    try {
        resolve_config(file, flags);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(ResolvedConfig, FlagsOverTheFileOverDefaults) {
    const ConfigFile file =
        parse_config_text("[limits]\nmax_active = 4\nmax_queued = 8\n", "/c/cfg.toml");
    const ResolvedConfig r =
        resolve_config(&file, {{"limits.max_queued", int64_t{3}, "--max-queued"}});
    EXPECT_EQ(r.values.limits.max_active, 4);
    EXPECT_EQ(r.values.limits.max_queued, 3);
    EXPECT_EQ(r.values.server.port, 8080);
    EXPECT_EQ(r.source("limits.max_active"), SettingSource::File);
    EXPECT_EQ(r.source("limits.max_queued"), SettingSource::Flag);
    EXPECT_EQ(r.source("server.port"), SettingSource::Default);
    EXPECT_EQ(r.file, "/c/cfg.toml");
}

TEST(ResolvedConfig, AFlagEqualToTheDefaultStillOverridesTheFile) {
    const ConfigFile file = parse_config_text(
        "[experts]\npool_gb = 12\n[defaults]\nstop_at_eos = false\n", "/c/cfg.toml");
    const ResolvedConfig r =
        resolve_config(&file, {{"experts.pool_gb", std::string("adaptive"), "--pool-gb"},
                               {"defaults.stop_at_eos", true, "--no-eos"}});
    EXPECT_EQ(r.values.experts.pool_gb, engine::PoolSetting::of(engine::PoolMode::Adaptive));
    EXPECT_TRUE(r.values.defaults.stop_at_eos);
    EXPECT_EQ(r.source("experts.pool_gb"), SettingSource::Flag);
}

TEST(ResolvedConfig, TheModelArgumentReplacesBothFileSelections) {
    const ConfigFile file = parse_config_text("[server]\nmodel_dir = \"tiny\"\n", "/c/cfg.toml");
    const ResolvedConfig r =
        resolve_config(&file, {{"server.model", std::string("small-moe"), "MODEL"},
                               {"server.model_dir", std::string(), "MODEL"}});
    EXPECT_EQ(r.values.server.model, "small-moe");
    EXPECT_EQ(r.values.server.model_dir, "");
}

TEST(ResolvedConfig, FlagValuesAreCheckedAndNameTheFlag) {
    EXPECT_EQ(error_of(nullptr, {{"limits.max_active", int64_t{0}, "--max-active"}}),
              "--max-active: must be an integer from 1 to 64, got 0");
    EXPECT_EQ(error_of(nullptr, {{"experts.pool_gb", std::string("huge"), "--pool-gb"}}),
              "--pool-gb: must be a number in [0, 1000000] or adaptive, max or mapped, got "
              "\"huge\"");
}

TEST(ResolvedConfig, InvalidCombinationsNameEveryKeyAndWhereItCameFrom) {
    const ConfigFile both = parse_config_text(
        "[server]\nmodel = \"small-moe\"\nmodel_dir = \"/stores/tiny\"\n", "/c/cfg.toml");
    EXPECT_EQ(error_of(&both, {}),
              "server.model (/c/cfg.toml:2) and server.model_dir (/c/cfg.toml:3) are exclusive: "
              "name the model one way");
    const ConfigFile mixed =
        parse_config_text("[experts]\nresident_bits = 3\nmiss_bits = 2\n", "/c/cfg.toml");
    EXPECT_EQ(error_of(&mixed, {}),
              "experts.miss_bits (/c/cfg.toml:3) = 2 needs 4-bit residents, but "
              "experts.resident_bits (/c/cfg.toml:2) = 3");
    EXPECT_EQ(error_of(&mixed, {{"experts.resident_bits", int64_t{4}, "--experts"}}), "");
    const ConfigFile tokens = parse_config_text("[defaults]\nmax_tokens = 4096\n", "/c/cfg.toml");
    EXPECT_EQ(error_of(&tokens, {}),
              "defaults.max_tokens (/c/cfg.toml:2) = 4096 leaves no room for a prompt in "
              "server.max_ctx (default) = 4096");
    EXPECT_EQ(error_of(&tokens, {{"server.max_ctx", int64_t{1024}, "--max-ctx"}}),
              "defaults.max_tokens (/c/cfg.toml:2) = 4096 leaves no room for a prompt in "
              "--max-ctx = 1024");
}

TEST(ResolvedConfig, PrintedSettingsReadBackAsTheSameConfiguration) {
    const ConfigFile file = parse_config_text(
        "[server]\nhost = \"a\\\"b\"\n[experts]\npool_gb = 2.5\nhost_pool_gb = \"max\"\n"
        "[defaults.sampling]\ntemperature = 0.7\nseed = 9223372036854775807\n",
        "/c/cfg.toml");
    const ResolvedConfig r =
        resolve_config(&file, {{"limits.max_active", int64_t{3}, "--max-active"}});
    const nlohmann::json report = settings_json(r, 7);
    EXPECT_EQ(report["generation"], 7);
    EXPECT_EQ(report["file"], "/c/cfg.toml");
    EXPECT_EQ(report["settings"]["experts"]["pool_gb"], 2.5);
    EXPECT_EQ(report["settings"]["defaults"]["sampling"]["temperature"], 0.7);
    EXPECT_EQ(report["sources"]["limits.max_active"], "flag");
    EXPECT_EQ(report["sources"]["server.port"], "default");
    const std::string toml = settings_toml(report);
    EXPECT_NE(toml.find("max_active = 3  # flag (--max-active)\n"), std::string::npos) << toml;
    EXPECT_NE(toml.find("temperature = 0.7  # file\n"), std::string::npos) << toml;
    const ConfigFile again = parse_config_text(toml, "/printed.toml");
    const ResolvedConfig back = resolve_config(&again, {});
    for (const Setting& setting : serve_settings()) {
        EXPECT_EQ(setting.get(back.values), setting.get(r.values)) << setting.key;
    }
}

}  // namespace
}  // namespace cherenkov::serving::config
