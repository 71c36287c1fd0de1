// The configuration file: every key parsed, errors naming file, line and key, relative paths,
// and cherenkov.example.toml listing every setting at its built-in default.
#include "serving/config/config_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "serving/config/resolved_config.h"

namespace cherenkov::serving::config {
namespace {

// Every key, each away from its default.
constexpr const char* kEveryKey = R"(
[server]
host = "0.0.0.0"
port = 9000
model_dir = "stores/tiny"
root = "/data/cherenkov"
socket = "run/control.sock"
max_ctx = 8192
backend = "cpu"
threads = 6
cpu_activations = "q8"

[limits]
max_active = 4
max_queued = 32
max_body_mb = 16
write_timeout_seconds = 45
prefill_quantum = 1024
prefill_chunk_seconds = 0.25
state_memory_gb = 12.5

[experts]
resident_bits = 4
miss_bits = 2
pool_gb = 20
host_pool_gb = "mapped"
cpu_experts = 0.25
cache_policy = "frequency"
cut_weak = 0.05
io_threads = 6
buffered_io = true
build_missing_store = false
drafts = 1

[prefix_cache]
max_mb = 1024
max_entries = 8
idle_seconds = 60
interval_tokens = 0

[sessions]
max_sessions = 16
memory_mb = 64
idle_seconds = 120.5

[defaults]
max_tokens = 512
stop_at_eos = false

[defaults.sampling]
temperature = 0.7
top_p = 0.9
top_k = 40
presence_penalty = 0.5
frequency_penalty = -0.5
repetition_penalty = 1.1
seed = 42
)";

std::string error_of(std::string_view text, const std::string& path = "/etc/cfg.toml") {
    try {
        parse_config_text(text, path);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        return e.what();
    }
    return "";
}

TEST(ConfigFile, ParsesEveryKey) {
    const ConfigFile file = parse_config_text(kEveryKey, "/etc/cherenkov/cfg.toml");
    const ResolvedConfig resolved = resolve_config(&file, {});
    const ServeConfig& c = resolved.values;
    EXPECT_EQ(c.server.host, "0.0.0.0");
    EXPECT_EQ(c.server.port, 9000);
    EXPECT_EQ(c.server.model, "");
    EXPECT_EQ(c.server.model_dir, "/etc/cherenkov/stores/tiny");
    EXPECT_EQ(c.server.root, "/data/cherenkov");
    EXPECT_EQ(c.server.socket, "/etc/cherenkov/run/control.sock");
    EXPECT_EQ(c.server.max_ctx, 8192);
    EXPECT_EQ(c.server.backend, "cpu");
    EXPECT_EQ(c.server.threads, 6);
    EXPECT_EQ(c.server.cpu_activations, "q8");
    EXPECT_EQ(c.limits.max_active, 4);
    EXPECT_EQ(c.limits.max_queued, 32);
    EXPECT_EQ(c.limits.max_body_mb, 16);
    EXPECT_EQ(c.limits.write_timeout_seconds, 45);
    EXPECT_EQ(c.limits.prefill_quantum.rows(), 1024);
    EXPECT_DOUBLE_EQ(c.limits.prefill_chunk_seconds, 0.25);
    EXPECT_EQ(c.limits.state_memory_gb, "12.5");
    EXPECT_EQ(c.experts.resident_bits, 4);
    EXPECT_EQ(c.experts.miss_bits, 2);
    EXPECT_EQ(c.experts.pool_gb, engine::PoolSetting::gb(20));
    EXPECT_EQ(c.experts.host_pool_gb, engine::PoolSetting::of(engine::PoolMode::Mapped));
    EXPECT_EQ(c.experts.cpu_experts, "0.25");
    EXPECT_EQ(c.experts.cache_policy, "frequency");
    EXPECT_DOUBLE_EQ(c.experts.cut_weak, 0.05);
    EXPECT_EQ(c.experts.io_threads, 6);
    EXPECT_TRUE(c.experts.buffered_io);
    EXPECT_FALSE(c.experts.build_missing_store);
    EXPECT_EQ(c.experts.drafts, 1);
    EXPECT_EQ(c.prefix_cache.max_mb, 1024);
    EXPECT_EQ(c.prefix_cache.max_entries, 8);
    EXPECT_DOUBLE_EQ(c.prefix_cache.idle_seconds, 60.0);
    EXPECT_EQ(c.prefix_cache.interval_tokens, 0);
    EXPECT_EQ(c.sessions.max_sessions, 16);
    EXPECT_EQ(c.sessions.memory_mb, 64);
    EXPECT_DOUBLE_EQ(c.sessions.idle_seconds, 120.5);
    EXPECT_EQ(c.defaults.max_tokens, 512);
    EXPECT_FALSE(c.defaults.stop_at_eos);
    EXPECT_FLOAT_EQ(c.defaults.sampling.temperature, 0.7F);
    EXPECT_FLOAT_EQ(c.defaults.sampling.top_p, 0.9F);
    EXPECT_EQ(c.defaults.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(c.defaults.sampling.presence_penalty, 0.5F);
    EXPECT_FLOAT_EQ(c.defaults.sampling.frequency_penalty, -0.5F);
    EXPECT_FLOAT_EQ(c.defaults.sampling.repetition_penalty, 1.1F);
    EXPECT_EQ(c.defaults.sampling.seed, 42U);
    // Every key but server.model was given, each with its line.
    for (const Setting& setting : serve_settings()) {
        if (setting.key == "server.model") continue;
        EXPECT_EQ(resolved.source(setting.key), SettingSource::File) << setting.key;
        EXPECT_GT(resolved.lines.at(setting.key), 0U) << setting.key;
    }
    EXPECT_EQ(resolved.lines.at("server.host"), 3U);
}

TEST(ConfigFile, ModelNameIsKeptAsGiven) {
    const ConfigFile file = parse_config_text("[server]\nmodel = \"small-moe\"\n", "/x/c.toml");
    EXPECT_EQ(std::get<std::string>(file.find("server.model")->value), "small-moe");
}

TEST(ConfigFile, RelativePathsResolveFromTheFilesFolder) {
    const ConfigFile file = parse_config_text(
        "[server]\nmodel_dir = \"../models/tiny\"\nroot = \"/abs/root\"\nsocket = \"\"\n",
        "/srv/conf/cherenkov.toml");
    EXPECT_EQ(std::get<std::string>(file.find("server.model_dir")->value), "/srv/models/tiny");
    EXPECT_EQ(std::get<std::string>(file.find("server.root")->value), "/abs/root");
    EXPECT_EQ(std::get<std::string>(file.find("server.socket")->value), "");
}

TEST(ConfigFile, UnknownKeysNameTheKeyFileAndLine) {
    EXPECT_EQ(error_of("[limits]\nmax_active = 2\nmax_actve = 3\n"),
              "/etc/cfg.toml:3: unknown key 'limits.max_actve'");
    EXPECT_EQ(error_of("[serverr]\nport = 1\n"), "/etc/cfg.toml:1: unknown key 'serverr'");
    // A key outside its table says where it belongs.
    EXPECT_EQ(error_of("\n\nport = 8081\n"),
              "/etc/cfg.toml:3: unknown key 'port' (did you mean server.port, in [server]?)");
    EXPECT_EQ(error_of("[defaults.sampling]\nmax_tokens = 5\n"),
              "/etc/cfg.toml:2: unknown key 'defaults.sampling.max_tokens' (did you mean "
              "defaults.max_tokens, in [defaults]?)");
}

TEST(ConfigFile, WrongTypesNameTheKeyAndLine) {
    EXPECT_EQ(error_of("[server]\nport = \"8080\"\n"),
              "/etc/cfg.toml:2: server.port: must be an integer, got \"8080\"");
    EXPECT_EQ(error_of("[limits]\n\nmax_active = 2.5\n"),
              "/etc/cfg.toml:3: limits.max_active: must be an integer, got 2.5");
    EXPECT_EQ(error_of("[experts]\nbuffered_io = 1\n"),
              "/etc/cfg.toml:2: experts.buffered_io: must be true or false, got 1");
    EXPECT_EQ(error_of("[server]\nhost = [\"a\"]\n"),
              "/etc/cfg.toml:2: server.host: must be a single value, got an array");
    EXPECT_EQ(error_of("server = 3\n"), "/etc/cfg.toml:1: server: must be a table ([server])");
    EXPECT_EQ(error_of("[server.port]\nx = 1\n"),
              "/etc/cfg.toml:1: server.port: must be a value, got a table");
    EXPECT_EQ(error_of("[defaults]\nsampling = 0.5\n"),
              "/etc/cfg.toml:2: defaults.sampling: must be a table ([defaults.sampling])");
}

TEST(ConfigFile, OutOfRangeValuesNameTheKeyAndLine) {
    EXPECT_EQ(error_of("[limits]\nmax_active = 65\n"),
              "/etc/cfg.toml:2: limits.max_active: must be an integer from 1 to 64, got 65");
    EXPECT_EQ(error_of("[experts]\nresident_bits = 5\n"),
              "/etc/cfg.toml:2: experts.resident_bits: must be 4, 3 or 2, got 5");
    EXPECT_EQ(error_of("[server]\nbackend = \"gpu\"\n"),
              "/etc/cfg.toml:2: server.backend: must be auto, cpu or cuda, got \"gpu\"");
    EXPECT_EQ(error_of("[defaults.sampling]\ntop_p = 0\n"),
              "/etc/cfg.toml:2: defaults.sampling.top_p: must be a number in (0, 1], got 0");
    EXPECT_EQ(error_of("[defaults.sampling]\ntemperature = nan\n"),
              "/etc/cfg.toml:2: defaults.sampling.temperature: must be a number in [0, 2], "
              "got nan");
    EXPECT_EQ(error_of("[experts]\npool_gb = \"lots\"\n"),
              "/etc/cfg.toml:2: experts.pool_gb: must be a number in [0, 1000000] or "
              "adaptive, max or mapped, got \"lots\"");
    EXPECT_EQ(error_of("[limits]\nstate_memory_gb = 0\n"),
              "/etc/cfg.toml:2: limits.state_memory_gb: must be a number in (0, 1000000] or "
              "auto, got 0");
    EXPECT_EQ(error_of("[defaults.sampling]\nseed = -1\n"),
              "/etc/cfg.toml:2: defaults.sampling.seed: must be an integer from 0 to "
              "9223372036854775807, got -1");
}

TEST(ConfigFile, SyntaxErrorsNameTheLineAndColumn) {
    const std::string message = error_of("[server]\nport = 80\nhost = \n");
    EXPECT_EQ(message.rfind("/etc/cfg.toml:3:", 0), 0U) << message;
    const std::string duplicate = error_of("[server]\nport = 80\nport = 81\n");
    EXPECT_EQ(duplicate.rfind("/etc/cfg.toml:3:", 0), 0U) << duplicate;
}

TEST(ConfigFile, AmountsTakeNumbersAndWords) {
    const ConfigFile file = parse_config_text(
        "[experts]\npool_gb = 0\nhost_pool_gb = 2.5\n[limits]\nstate_memory_gb = \"auto\"\n",
        "/c.toml");
    EXPECT_EQ(std::get<std::string>(file.find("experts.pool_gb")->value), "0");
    EXPECT_EQ(std::get<std::string>(file.find("experts.host_pool_gb")->value), "2.5");
    EXPECT_EQ(std::get<std::string>(file.find("limits.state_memory_gb")->value), "auto");
}

TEST(ConfigFile, MissingFileIsNotFound) {
    try {
        read_config_file("/nonexistent/cherenkov.toml");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/cherenkov.toml"), std::string::npos);
    }
}

// The example lists every setting, each at the built-in default, so it cannot drift.
TEST(ConfigFile, ExampleFileListsEverySettingAtItsDefault) {
    const ConfigFile file =
        read_config_file(std::string(CHERENKOV_SOURCE_DIR) + "/cherenkov.example.toml");
    const ServeConfig defaults;
    for (const Setting& setting : serve_settings()) {
        const FileValue* value = file.find(setting.key);
        ASSERT_NE(value, nullptr) << setting.key << " is missing from cherenkov.example.toml";
        ServeConfig read;
        setting.set(read, value->value);
        EXPECT_EQ(setting.get(read), setting.get(defaults))
            << setting.key << " in cherenkov.example.toml line " << value->line
            << " differs from the built-in default " << describe(setting.get(defaults));
    }
    EXPECT_EQ(file.values.size(), serve_settings().size());
}

}  // namespace
}  // namespace cherenkov::serving::config
