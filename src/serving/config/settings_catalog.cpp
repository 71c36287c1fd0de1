// The settings table (settings_catalog.h). Ranges match the flags' (cmd_serve.cpp,
// cli/model_options.cpp) and the request fields' (json_fields.cpp), so a value the file accepts
// is one the server could also be given on the command line or in a request.
#include "serving/config/settings_catalog.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace cherenkov::serving::config {
namespace {

// A float's value as the double its shortest text reads back as, so 0.7F is 0.7 (not
// 0.699999988) in printed settings and comparisons.
double widen(float value) {
    char text[32];
    const auto result = std::to_chars(text, text + sizeof text, value);
    return std::strtod(std::string(text, result.ptr).c_str(), nullptr);
}

SettingValue to_value(bool v) {
    return v;
}
SettingValue to_value(int v) {
    return static_cast<int64_t>(v);
}
SettingValue to_value(int64_t v) {
    return v;
}
SettingValue to_value(uint64_t v) {
    return static_cast<int64_t>(v);
}
SettingValue to_value(double v) {
    return v;
}
SettingValue to_value(float v) {
    return widen(v);
}
SettingValue to_value(const std::string& v) {
    return v;
}
SettingValue to_value(const engine::PoolSetting& v) {
    return engine::pool_setting_text(v);
}
SettingValue to_value(const engine::PrefillQuantum& v) {
    return v.rows();
}

void from_value(const SettingValue& value, bool& field) {
    field = std::get<bool>(value);
}
void from_value(const SettingValue& value, int& field) {
    field = static_cast<int>(std::get<int64_t>(value));
}
void from_value(const SettingValue& value, int64_t& field) {
    field = std::get<int64_t>(value);
}
void from_value(const SettingValue& value, uint64_t& field) {
    field = static_cast<uint64_t>(std::get<int64_t>(value));
}
void from_value(const SettingValue& value, double& field) {
    field = std::get<double>(value);
}
void from_value(const SettingValue& value, float& field) {
    field = static_cast<float>(std::get<double>(value));
}
void from_value(const SettingValue& value, std::string& field) {
    field = std::get<std::string>(value);
}
// An Amount checked by check_value: one of the setting's words, or a number of decimal GB in
// range, spelled as check_value spells it (which may be "1e-07").
void from_value(const SettingValue& value, engine::PoolSetting& field) {
    const std::string& text = std::get<std::string>(value);
    double gb = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), gb);
    if (result.ec == std::errc() && result.ptr == text.data() + text.size()) {
        field = engine::PoolSetting::gb(gb);
        return;
    }
    field = engine::parse_pool_setting(text, engine::PoolFlag::HostPool);
}
// A quantum in the setting's range (check_value); made here, so a message would name the key.
void from_value(const SettingValue& value, engine::PrefillQuantum& field, const std::string& key) {
    field = engine::PrefillQuantum::of(std::get<int64_t>(value), key);
}

// `access` is a generic lambda returning a reference to the field of a (const) ServeConfig.
template <typename Access>
Setting make(Setting spec, Access access) {
    spec.get = [access](const ServeConfig& config) { return to_value(access(config)); };
    spec.set = [access, key = spec.key](ServeConfig& config, const SettingValue& value) {
        auto& field = access(config);
        // Typed values that check themselves when made name the key they came from.
        if constexpr (requires { from_value(value, field, key); }) {
            from_value(value, field, key);
        } else {
            from_value(value, field);
        }
    };
    return spec;
}

constexpr double kInt32Max = std::numeric_limits<int32_t>::max();
constexpr double kYearSeconds = 31536000;

std::vector<Setting> build_settings() {
    using K = ValueKind;
    std::vector<Setting> s;
    // [server]
    s.push_back(make(
        {.key = "server.host",
         .kind = K::Text,
         .flag = "--host",
         .comment = "Address the HTTP server listens on"},
        [](auto& c) -> auto& { return c.server.host; }));
    s.push_back(make(
        {.key = "server.port",
         .min = 0,
         .max = 65535,
         .flag = "--port",
         .comment = "HTTP port; 0 picks a free one"},
        [](auto& c) -> auto& { return c.server.port; }));
    s.push_back(make(
        {.key = "server.model",
         .kind = K::Text,
         .comment = "Model to serve: an alias, ID, hf:// or disk:// URI or commit "
                    "prefix in the model index (exclusive with model_dir; a MODEL "
                    "argument replaces both; neither: the default model)"},
        [](auto& c) -> auto& { return c.server.model; }));
    s.push_back(make(
        {.key = "server.model_dir",
         .kind = K::Text,
         .path = true,
         .comment = "Or a packed store directory to serve (exclusive with model)"},
        [](auto& c) -> auto& { return c.server.model_dir; }));
    s.push_back(make(
        {.key = "server.root",
         .kind = K::Text,
         .path = true,
         .flag = "--root",
         .comment = "Data root of the model index; empty: the XDG paths"},
        [](auto& c) -> auto& { return c.server.root; }));
    s.push_back(make(
        {.key = "server.socket",
         .kind = K::Text,
         .path = true,
         .flag = "--socket",
         .comment = "Control socket; empty: $TMPDIR/cherenkov-UID/control.sock"},
        [](auto& c) -> auto& { return c.server.socket; }));
    s.push_back(make(
        {.key = "server.max_ctx",
         .min = 1,
         .max = double(int64_t{1} << 24),
         .flag = "--max-ctx",
         .comment = "Most tokens of prompt, output and draft headroom per request"},
        [](auto& c) -> auto& { return c.server.max_ctx; }));
    s.push_back(make(
        {.key = "server.backend",
         .kind = K::Text,
         .words = {"auto", "cpu", "cuda"},
         .flag = "--backend",
         .comment = "Where the model runs: auto (cuda when a device is present), "
                    "cpu or cuda"},
        [](auto& c) -> auto& { return c.server.backend; }));
    s.push_back(make(
        {.key = "server.threads",
         .min = 0,
         .max = 4096,
         .flag = "--threads",
         .comment = "CPU threads; 0: every online CPU"},
        [](auto& c) -> auto& { return c.server.threads; }));
    s.push_back(make(
        {.key = "server.cpu_activations",
         .kind = K::Text,
         .words = {"auto", "f32", "q8"},
         .flag = "--cpu-activations",
         .comment = "Activations in the CPU's 4-bit matmuls: f32 (the reference order) or q8 "
                    "(int8, integer products: faster); auto: f32 on the CPU backend, q8 for "
                    "CUDA's CPU experts"},
        [](auto& c) -> auto& { return c.server.cpu_activations; }));
    // [limits]
    s.push_back(make(
        {.key = "limits.max_active",
         .min = 1,
         .max = 64,
         .flag = "--max-active",
         .comment = "Requests interleaved at once"},
        [](auto& c) -> auto& { return c.limits.max_active; }));
    s.push_back(make(
        {.key = "limits.max_queued",
         .min = 0,
         .max = 4096,
         .flag = "--max-queued",
         .comment = "Requests waiting for admission before 503"},
        [](auto& c) -> auto& { return c.limits.max_queued; }));
    s.push_back(make(
        {.key = "limits.max_body_mb",
         .min = 1,
         .max = 1024,
         .comment = "Largest request body, MiB (larger ones get 413)"},
        [](auto& c) -> auto& { return c.limits.max_body_mb; }));
    s.push_back(make(
        {.key = "limits.write_timeout_seconds",
         .min = 1,
         .max = 3600,
         .comment = "Seconds a response write may block before the client counts "
                    "as gone (its request is cancelled)"},
        [](auto& c) -> auto& { return c.limits.write_timeout_seconds; }));
    s.push_back(make(
        {.key = "limits.prefill_quantum",
         .min = 1,
         .max = double(engine::kMaxPrefillQuantum),
         .flag = "--prefill-quantum",
         .comment = "Most prompt tokens per prefill call; their scratch is kept "
                    "outside the expert pool"},
        [](auto& c) -> auto& { return c.limits.prefill_quantum; }));
    s.push_back(make(
        {.key = "limits.prefill_chunk_seconds",
         .kind = K::Real,
         .min = 0,
         .max = 60,
         .flag = "--prefill-chunk-seconds",
         .comment = "While other requests wait, aim prefill chunks at this many "
                    "seconds; 0: fixed chunks of min(128, prefill_quantum)"},
        [](auto& c) -> auto& { return c.limits.prefill_chunk_seconds; }));
    s.push_back(make(
        {.key = "limits.state_memory_gb",
         .kind = K::Amount,
         .min = 0,
         .max = 1e6,
         .open_min = true,
         .words = {"auto"},
         .flag = "--state-memory-gb",
         .comment = "Sequence-state memory admission may reserve, decimal GB; "
                    "auto: a quarter of the memory available at startup"},
        [](auto& c) -> auto& { return c.limits.state_memory_gb; }));
    // [experts]
    s.push_back(make(
        {.key = "experts.resident_bits",
         .words = {"4", "3", "2"},
         .flag = "--experts",
         .comment = "Routed expert precision: 4, 3 or 2 bits"},
        [](auto& c) -> auto& { return c.experts.resident_bits; }));
    s.push_back(make(
        {.key = "experts.miss_bits",
         .words = {"0", "4", "3", "2"},
         .flag = "--miss-experts",
         .comment = "Precision of unpredicted misses (mixed mode needs "
                    "resident_bits = 4); 0: as resident_bits"},
        [](auto& c) -> auto& { return c.experts.miss_bits; }));
    s.push_back(make(
        {.key = "experts.pool_gb",
         .kind = K::Amount,
         .min = 0,
         .max = 1e6,
         .words = {"adaptive", "max", "mapped"},
         .flag = "--pool-gb",
         .comment = "Expert cache: decimal GB, adaptive (from available memory), "
                    "max, or mapped (cpu: the table used in place); 0: none"},
        [](auto& c) -> auto& { return c.experts.pool_gb; }));
    s.push_back(make(
        {.key = "experts.host_pool_gb",
         .kind = K::Amount,
         .min = 0,
         .max = 1e6,
         .words = {"staging", "adaptive", "max", "mapped"},
         .flag = "--host-pool-gb",
         .comment = "cuda: the host cache behind the device pool: decimal GB, "
                    "staging (a few layer-steps), adaptive, max or mapped"},
        [](auto& c) -> auto& { return c.experts.host_pool_gb; }));
    s.push_back(make(
        {.key = "experts.cpu_experts",
         .kind = K::Amount,
         .min = 0,
         .max = 1,
         .words = {"off", "auto"},
         .flag = "--cpu-experts",
         .comment = "cuda: decode misses of the device pool computed on the CPU instead of "
                    "copied: auto (the split that balances both sides), off, or a share 0-1"},
        [](auto& c) -> auto& { return c.experts.cpu_experts; }));
    s.push_back(make(
        {.key = "experts.cache_policy",
         .kind = K::Text,
         .words = {"lru", "frequency"},
         .flag = "--cache-policy",
         .comment = "Expert replacement: lru or frequency"},
        [](auto& c) -> auto& { return c.experts.cache_policy; }));
    s.push_back(make(
        {.key = "experts.cut_weak",
         .kind = K::Real,
         .min = 0,
         .max = 1,
         .flag = "--cut-weak",
         .comment = "Skip late experts below this routing weight; 0: off (else "
                    "output depends on disk timing)"},
        [](auto& c) -> auto& { return c.experts.cut_weak; }));
    s.push_back(make(
        {.key = "experts.io_threads",
         .min = 0,
         .max = 256,
         .flag = "--io-threads",
         .comment = "Expert reads in flight; 0: half the CPUs, 4 to 8"},
        [](auto& c) -> auto& { return c.experts.io_threads; }));
    s.push_back(make(
        {.key = "experts.buffered_io",
         .kind = K::Bool,
         .flag = "--buffered-io",
         .comment = "Read experts through the page cache instead of O_DIRECT"},
        [](auto& c) -> auto& { return c.experts.buffered_io; }));
    s.push_back(make(
        {.key = "experts.build_missing_store",
         .kind = K::Bool,
         .flag = "--no-build-missing-store",
         .comment = "Build a missing low-bit expert table at startup; false: fail "
                    "instead"},
        [](auto& c) -> auto& { return c.experts.build_missing_store; }));
    s.push_back(make(
        {.key = "experts.drafts",
         .words = {"0", "1", "2"},
         .flag = "--drafts",
         .comment = "MTP drafts per step (adaptive; greedy requests only); 0: no "
                    "draft head"},
        [](auto& c) -> auto& { return c.experts.drafts; }));
    // [prefix_cache]
    s.push_back(make(
        {.key = "prefix_cache.max_mb",
         .min = 0,
         .max = double(int64_t{1} << 20),
         .flag = "--prefix-cache-mb",
         .comment = "Host memory for prefix checkpoints, MiB; 0: no prefix cache"},
        [](auto& c) -> auto& { return c.prefix_cache.max_mb; }));
    s.push_back(make(
        {.key = "prefix_cache.max_entries",
         .min = 1,
         .max = 100000,
         .flag = "--prefix-cache-entries",
         .comment = "Most prefix checkpoints kept"},
        [](auto& c) -> auto& { return c.prefix_cache.max_entries; }));
    s.push_back(make(
        {.key = "prefix_cache.idle_seconds",
         .kind = K::Real,
         .min = 0,
         .max = kYearSeconds,
         .flag = "--prefix-cache-idle-seconds",
         .comment = "Drop checkpoints unused this long; 0: never"},
        [](auto& c) -> auto& { return c.prefix_cache.idle_seconds; }));
    s.push_back(make(
        {.key = "prefix_cache.interval_tokens",
         .min = 0,
         .max = double(int64_t{1} << 24),
         .flag = "--prefix-cache-interval",
         .comment = "Also checkpoint long prompts every this many tokens; 0: only "
                    "message boundaries and complete prompts"},
        [](auto& c) -> auto& { return c.prefix_cache.interval_tokens; }));
    // [sessions]
    s.push_back(make(
        {.key = "sessions.max_sessions",
         .min = 1,
         .max = 1000000,
         .flag = "--max-sessions",
         .comment = "Most sessions kept (the least recently used idle one makes "
                    "room)"},
        [](auto& c) -> auto& { return c.sessions.max_sessions; }));
    s.push_back(make(
        {.key = "sessions.memory_mb",
         .min = 1,
         .max = double(int64_t{1} << 20),
         .flag = "--session-memory-mb",
         .comment = "Memory for all sessions' history, MiB"},
        [](auto& c) -> auto& { return c.sessions.memory_mb; }));
    s.push_back(make(
        {.key = "sessions.idle_seconds",
         .kind = K::Real,
         .min = 0,
         .max = kYearSeconds,
         .flag = "--session-idle-seconds",
         .comment = "Drop sessions idle this long; 0: never"},
        [](auto& c) -> auto& { return c.sessions.idle_seconds; }));
    // [defaults] and [defaults.sampling]: what requests start from; reloadable.
    s.push_back(make(
        {.key = "defaults.max_tokens",
         .min = 0,
         .max = kInt32Max,
         .comment = "Output tokens when a request gives no max_tokens; 0: the rest "
                    "of the context"},
        [](auto& c) -> auto& { return c.defaults.max_tokens; }));
    s.push_back(make(
        {.key = "defaults.stop_at_eos",
         .kind = K::Bool,
         .flag = "--no-eos",
         .comment = "End generation at EOS (server-owned; false for benchmarks)"},
        [](auto& c) -> auto& { return c.defaults.stop_at_eos; }));
    s.push_back(make(
        {.key = "defaults.sampling.temperature",
         .kind = K::Real,
         .min = 0,
         .max = 2,
         .comment = "0: greedy (MTP drafts only speculate for greedy requests)"},
        [](auto& c) -> auto& { return c.defaults.sampling.temperature; }));
    s.push_back(make(
        {.key = "defaults.sampling.top_p",
         .kind = K::Real,
         .min = 0,
         .max = 1,
         .open_min = true,
         .comment = "Nucleus sampling; 1: off"},
        [](auto& c) -> auto& { return c.defaults.sampling.top_p; }));
    s.push_back(make(
        {.key = "defaults.sampling.top_k",
         .min = 0,
         .max = kInt32Max,
         .comment = "Keep the k most likely tokens; 0: off"},
        [](auto& c) -> auto& { return c.defaults.sampling.top_k; }));
    s.push_back(make(
        {.key = "defaults.sampling.presence_penalty",
         .kind = K::Real,
         .min = -2,
         .max = 2,
         .comment = "Subtracted once per distinct token seen"},
        [](auto& c) -> auto& { return c.defaults.sampling.presence_penalty; }));
    s.push_back(make(
        {.key = "defaults.sampling.frequency_penalty",
         .kind = K::Real,
         .min = -2,
         .max = 2,
         .comment = "Subtracted per occurrence of a token seen"},
        [](auto& c) -> auto& { return c.defaults.sampling.frequency_penalty; }));
    s.push_back(make(
        {.key = "defaults.sampling.repetition_penalty",
         .kind = K::Real,
         .min = 0,
         .max = 10,
         .open_min = true,
         .comment = "Divides seen tokens' positive logits (multiplies negative "
                    "ones); 1: off"},
        [](auto& c) -> auto& { return c.defaults.sampling.repetition_penalty; }));
    s.push_back(make(
        {.key = "defaults.sampling.seed",
         .min = 0,
         .max = double(std::numeric_limits<int64_t>::max()),
         .comment = "Random seed of requests that give none"},
        [](auto& c) -> auto& { return c.defaults.sampling.seed; }));
    return s;
}

std::string number_text(double value) {
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, value);
    std::string out(text, result.ptr);
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
    return out;
}

// A bound as people write it: 0, 1000000, 0.5.
std::string bound_text(double value) {
    if (value == std::floor(value) && std::fabs(value) < 1e15) {
        return std::to_string(static_cast<int64_t>(value));
    }
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, value);
    return std::string(text, result.ptr);
}

std::string range_text(const Setting& setting) {
    std::ostringstream out;
    out << (setting.open_min ? "(" : "[") << bound_text(setting.min) << ", "
        << bound_text(setting.max) << "]";
    std::string text = out.str();
    if (setting.kind == ValueKind::Integer) {
        // Integers read better without ".0": "from 1 to 64".
        const std::string hi = setting.max >= 9.2e18
                                   ? std::to_string(std::numeric_limits<int64_t>::max())
                                   : std::to_string(static_cast<int64_t>(setting.max));
        return "from " + std::to_string(static_cast<int64_t>(setting.min)) + " to " + hi;
    }
    return "in " + text;
}

std::string words_text(const std::vector<std::string>& words) {
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) {
        if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
        out += words[i];
    }
    return out;
}

[[noreturn]] void bad(const std::string& what, const std::string& why, const SettingValue& value) {
    throw_invalid(what + ": " + why + ", got " + describe(value));
}

bool in_range(const Setting& setting, double value) {
    if (!std::isfinite(value)) return false;
    if (setting.open_min ? value <= setting.min : value < setting.min) return false;
    return value <= setting.max;
}

}  // namespace

std::string_view Setting::section() const {
    return std::string_view(key).substr(0, key.rfind('.'));
}

std::string_view Setting::name() const {
    return std::string_view(key).substr(key.rfind('.') + 1);
}

bool Setting::reloadable() const {
    return section().starts_with("defaults");
}

const std::vector<Setting>& serve_settings() {
    static const std::vector<Setting> settings = build_settings();
    return settings;
}

const Setting* find_setting(std::string_view key) {
    for (const Setting& setting : serve_settings()) {
        if (setting.key == key) return &setting;
    }
    return nullptr;
}

const Setting* find_setting_by_flag(std::string_view flag) {
    for (const Setting& setting : serve_settings()) {
        if (!setting.flag.empty() && setting.flag == flag) return &setting;
    }
    return nullptr;
}

const std::vector<std::string>& setting_sections() {
    static const std::vector<std::string> sections = [] {
        std::vector<std::string> out;
        for (const Setting& setting : serve_settings()) {
            const std::string section(setting.section());
            if (std::find(out.begin(), out.end(), section) == out.end()) out.push_back(section);
        }
        return out;
    }();
    return sections;
}

std::string describe(const SettingValue& value) {
    if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
    if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
    if (const auto* d = std::get_if<double>(&value)) return number_text(*d);
    return "\"" + std::get<std::string>(value) + "\"";
}

SettingValue check_value(const Setting& setting, const SettingValue& value,
                         const std::string& what) {
    switch (setting.kind) {
        case ValueKind::Bool:
            if (!std::holds_alternative<bool>(value)) bad(what, "must be true or false", value);
            return value;
        case ValueKind::Integer: {
            const auto* i = std::get_if<int64_t>(&value);
            if (i == nullptr) bad(what, "must be an integer", value);
            if (!setting.words.empty()) {
                if (std::find(setting.words.begin(), setting.words.end(), std::to_string(*i)) ==
                    setting.words.end()) {
                    bad(what, "must be " + words_text(setting.words), value);
                }
                return value;
            }
            // Compared as integers: int64's top values do not survive a trip through double.
            const auto lo = static_cast<int64_t>(setting.min);
            const bool top = setting.max >= 9.2e18;
            if (*i < lo || (!top && *i > static_cast<int64_t>(setting.max))) {
                bad(what, "must be an integer " + range_text(setting), value);
            }
            return value;
        }
        case ValueKind::Real: {
            double d = 0;
            if (const auto* i = std::get_if<int64_t>(&value)) {
                d = static_cast<double>(*i);
            } else if (const auto* r = std::get_if<double>(&value)) {
                d = *r;
            } else {
                bad(what, "must be a number", value);
            }
            if (!in_range(setting, d)) bad(what, "must be a number " + range_text(setting), value);
            return d;
        }
        case ValueKind::Text: {
            const auto* text = std::get_if<std::string>(&value);
            if (text == nullptr) bad(what, "must be a string", value);
            if (!setting.words.empty() && std::find(setting.words.begin(), setting.words.end(),
                                                    *text) == setting.words.end()) {
                bad(what, "must be " + words_text(setting.words), value);
            }
            return value;
        }
        case ValueKind::Amount: {
            // Numbers keep one spelling whichever way they came ("20", 20, 20.0 and "020" are
            // all "20"), so printed settings read back equal.
            const auto amount_text = [](double d) {
                if (d == std::floor(d) && d < 1e15) return std::to_string(static_cast<int64_t>(d));
                char text[64];
                const auto result = std::to_chars(text, text + sizeof text, d);
                return std::string(text, result.ptr);
            };
            const std::string expected =
                "must be a number " + range_text(setting) + " or " + words_text(setting.words);
            if (const auto* text = std::get_if<std::string>(&value)) {
                if (std::find(setting.words.begin(), setting.words.end(), *text) !=
                    setting.words.end()) {
                    return value;
                }
                // A number written as a string ("12.5", as flags give it) counts as the number.
                double d = 0;
                const auto result = std::from_chars(text->data(), text->data() + text->size(), d);
                if (text->empty() || result.ec != std::errc() ||
                    result.ptr != text->data() + text->size() || !in_range(setting, d)) {
                    bad(what, expected, value);
                }
                return amount_text(d);
            }
            double d = 0;
            if (const auto* i = std::get_if<int64_t>(&value)) {
                d = static_cast<double>(*i);
            } else if (const auto* r = std::get_if<double>(&value)) {
                d = *r;
            } else {
                bad(what, expected, value);
            }
            if (!in_range(setting, d)) bad(what, expected, value);
            return amount_text(d);
        }
    }
    throw_internal("unknown setting kind");
}

}  // namespace cherenkov::serving::config
