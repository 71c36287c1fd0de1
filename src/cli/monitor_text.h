// Text output of the monitoring commands (status, stats): Markdown when stdout is not a
// terminal (so `cherenkov stats summary > stats.md` is a document), the terminal's palette on a
// terminal, plain when NO_COLOR is set (https://no-color.org). Tables are Markdown pipe tables
// either way; on a terminal their columns are padded and the header is bold.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cherenkov::cli {

struct TextStyle {
    bool terminal = false;  // stdout is a terminal
    bool color = false;     // terminal and NO_COLOR unset

    static TextStyle for_stdout();
    std::string heading(const std::string& text, int level = 1) const;
    std::string bold(const std::string& text) const;
    std::string dim(const std::string& text) const;
    // "- key: value" lines.
    std::string item(const std::string& key, const std::string& value) const;
    std::string table(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows) const;
};

// "1.2 GB", "512 B": decimal units, as the rest of the CLI prints sizes.
std::string bytes_text(uint64_t bytes);
// object[key], or null when the object lacks it (or is not an object).
const nlohmann::json& field(const nlohmann::json& object, const char* key);
// A JSON number, string or null as table text ("-" for null or absent).
std::string value_text(const nlohmann::json& value);
// "12.5%" of a ratio; "-" without a denominator.
std::string percent_text(uint64_t numerator, uint64_t denominator);
// Unix seconds as UTC "2026-01-02 03:04:05".
std::string time_text(double unix_seconds);

// The control-socket path from --socket or the default.
std::string socket_or_default(const std::string& flag);
// Sends `request` and returns the answer; an {"error"} answer throws the matching Error kind
// (not_ready → Busy, invalid_request → InvalidInput, not_found → NotFound, else Io) with the
// server's message.
nlohmann::json control_call(const std::string& socket_path, const nlohmann::json& request,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace cherenkov::cli
