// The catalogue of `cherenkov serve`'s settings: for each, its TOML key, the kind and range of
// value it takes, the CLI flag that also sets it, a one-line description, and how to read and
// write it in a ServeConfig. The loader, the precedence rules, --print-config, reload and the
// example file's test all go through this one list, so a setting cannot be known to one and
// missing from another.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "serving/config/serve_config.h"

namespace cherenkov::serving::config {

// One setting's value as TOML holds it.
using SettingValue = std::variant<bool, int64_t, double, std::string>;

enum class ValueKind {
    Bool,
    Integer,  // in [min, max]
    Real,     // in [min, max] (min excluded when open_min); integers are accepted
    Text,     // one of `words`, or any string when `words` is empty
    Amount,   // a number in [min, max], or one of `words` (pool sizes: 12.5, "adaptive")
};

struct Setting {
    std::string key;  // "limits.max_active", "defaults.sampling.top_p"
    ValueKind kind = ValueKind::Integer;
    double min = 0;
    double max = 0;
    bool open_min = false;
    std::vector<std::string> words{};
    // A relative value given in the file names a path from the file's folder.
    bool path = false;
    std::string flag{};  // the `cherenkov serve` flag that sets it too; empty: none
    std::string comment{};
    std::function<SettingValue(const ServeConfig&)> get{};
    std::function<void(ServeConfig&, const SettingValue&)> set{};

    // "limits" for "limits.max_active", "defaults.sampling" for "defaults.sampling.top_p".
    std::string_view section() const;
    std::string_view name() const;
    // Only [defaults] and [defaults.sampling] change on reload.
    bool reloadable() const;
};

// Every setting, in the order of cherenkov.example.toml.
const std::vector<Setting>& serve_settings();
// The setting with this key or flag, or null.
const Setting* find_setting(std::string_view key);
const Setting* find_setting_by_flag(std::string_view flag);
// The tables settings live in ("server", ..., "defaults", "defaults.sampling"), in order.
const std::vector<std::string>& setting_sections();

// Checks `value` against `setting` and returns it in its canonical form (a Real as double, an
// Amount as its text: "adaptive", "12.5"). Throws InvalidInput "<what>: <why>, got <value>",
// with `what` naming where the value came from (a key and line, or a flag).
SettingValue check_value(const Setting& setting, const SettingValue& value,
                         const std::string& what);

// The value as messages quote it: 12, 0.5, true, "adaptive".
std::string describe(const SettingValue& value);

}  // namespace cherenkov::serving::config
