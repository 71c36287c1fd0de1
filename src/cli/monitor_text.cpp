#include "cli/monitor_text.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "base/error.h"
#include "serving/control/control_client.h"

namespace cherenkov::cli {

TextStyle TextStyle::for_stdout() {
    TextStyle style;
    style.terminal = ::isatty(STDOUT_FILENO) == 1;
    const char* no_color = std::getenv("NO_COLOR");
    style.color = style.terminal && (no_color == nullptr || *no_color == '\0');
    return style;
}

std::string TextStyle::heading(const std::string& text, int level) const {
    if (color) return "\033[1;36m" + text + "\033[0m\n";
    return std::string(static_cast<size_t>(level), '#') + " " + text + "\n";
}

std::string TextStyle::bold(const std::string& text) const {
    return color ? "\033[1m" + text + "\033[0m" : (terminal ? text : "**" + text + "**");
}

std::string TextStyle::dim(const std::string& text) const {
    return color ? "\033[2m" + text + "\033[0m" : text;
}

std::string TextStyle::item(const std::string& key, const std::string& value) const {
    if (color) return "  \033[2m" + key + ":\033[0m " + value + "\n";
    return "- " + key + ": " + value + "\n";
}

std::string TextStyle::table(const std::vector<std::string>& header,
                             const std::vector<std::vector<std::string>>& rows) const {
    std::vector<size_t> widths(header.size(), 3);
    for (size_t column = 0; column < header.size(); ++column) {
        widths[column] = std::max(widths[column], header[column].size());
        for (const auto& row : rows)
            if (column < row.size()) widths[column] = std::max(widths[column], row[column].size());
    }
    auto line = [&](const std::vector<std::string>& cells, bool head) {
        std::string out = "|";
        for (size_t column = 0; column < header.size(); ++column) {
            const std::string cell = column < cells.size() ? cells[column] : "";
            const std::string padded =
                std::string(column == 0 ? 0 : widths[column] - cell.size(), ' ') + cell +
                std::string(column == 0 ? widths[column] - cell.size() : 0, ' ');
            out += " " + (head && color ? "\033[1m" + padded + "\033[0m" : padded) + " |";
        }
        return out + "\n";
    };
    std::string out = line(header, true);
    out += "|";
    for (size_t column = 0; column < header.size(); ++column)
        out += (column == 0 ? " " + std::string(widths[column], '-') + " |"
                            : " " + std::string(widths[column] - 1, '-') + ": |");
    out += "\n";
    for (const auto& row : rows) out += line(row, false);
    return out;
}

std::string bytes_text(uint64_t bytes) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1000.0 && unit + 1 < std::size(units)) {
        value /= 1000.0;
        ++unit;
    }
    char buf[32];
    if (unit == 0) {
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(buf, sizeof buf, "%.1f %s", value, units[unit]);
    }
    return buf;
}

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
    static const nlohmann::json kNull;  // a constant, not cached state
    if (!object.is_object()) return kNull;
    const auto it = object.find(key);
    return it == object.end() ? kNull : *it;
}

std::string value_text(const nlohmann::json& value) {
    if (value.is_null()) return "-";
    if (value.is_string()) return value.get<std::string>();
    if (value.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", value.get<double>());
        return buf;
    }
    return value.dump();
}

std::string percent_text(uint64_t numerator, uint64_t denominator) {
    if (denominator == 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%",
                  100.0 * static_cast<double>(numerator) / static_cast<double>(denominator));
    return buf;
}

std::string time_text(double unix_seconds) {
    const auto seconds = static_cast<time_t>(unix_seconds);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &parts);
    return buf;
}

std::string socket_or_default(const std::string& flag) {
    return flag.empty() ? serving::control::default_control_socket_path() : flag;
}

nlohmann::json control_call(const std::string& socket_path, const nlohmann::json& request,
                            std::chrono::milliseconds timeout) {
    nlohmann::json answer = serving::control::control_request(socket_path, request, timeout);
    if (!answer.is_object()) throw_io("the server on " + socket_path + " answered a non-object");
    const auto error = answer.find("error");
    if (error == answer.end()) return answer;
    const std::string code = error->value("code", "failed");
    const std::string message = error->value("message", "the server refused the request");
    if (code == "not_ready") throw Error(ErrorKind::Busy, message);
    if (code == "invalid_request") throw Error(ErrorKind::InvalidInput, message);
    if (code == "not_found") throw Error(ErrorKind::NotFound, message);
    if (code == "not_available") throw Error(ErrorKind::Unsupported, message);
    throw_io(message);
}

}  // namespace cherenkov::cli
