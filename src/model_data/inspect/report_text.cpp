#include "model_data/inspect/report_text.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace cherenkov::model_data::inspect {
namespace {

using nlohmann::json;

std::string shape_text(const json& shape) {
    std::string text = "[";
    for (size_t axis = 0; axis < shape.size(); ++axis) {
        if (axis) text += ", ";
        text += std::to_string(shape[axis].get<uint64_t>());
    }
    return text + "]";
}

std::string pad(const std::string& text, size_t width) {
    return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

void render_table(std::ostringstream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()), 0);
        for (size_t column = 0; column < row.size(); ++column) widths[column] = std::max(widths[column], row[column].size());
    }
    for (const auto& row : rows) {
        std::string line = "  ";
        for (size_t column = 0; column < row.size(); ++column) {
            line += column + 1 == row.size() ? row[column] : pad(row[column], widths[column] + 2);
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << '\n';
    }
}

void render_files(std::ostringstream& out, const json& report) {
    const json& totals = report["totals"];
    const json& files = report["files"];
    out << "files:       " << files.size() << " safetensors file" << (files.size() == 1 ? "" : "s");
    if (report.contains("index") && !report["index"].is_null()) out << " (sharded by " << report["index"]["file"].get<std::string>() << ")";
    out << ", " << totals["n_tensors"].get<uint64_t>() << " tensors, " << format_bytes(totals["n_bytes"].get<uint64_t>())
        << " of tensor data\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& file : files) {
        rows.push_back({file["name"].get<std::string>(), std::to_string(file["n_tensors"].get<uint64_t>()) + " tensors",
                        format_bytes(file["size"].get<uint64_t>()),
                        "header " + std::to_string(file["header_bytes"].get<uint64_t>()) + " B"});
    }
    render_table(out, rows);
    out << "dtypes:      ";
    bool first = true;
    for (const auto& [dtype, n_bytes] : totals["bytes_by_dtype"].items()) {
        out << (first ? "" : ", ") << dtype << " " << format_bytes(n_bytes.get<uint64_t>());
        first = false;
    }
    out << '\n';
}

void render_encodings(std::ostringstream& out, const json& logical) {
    std::map<std::string, size_t> counts;
    for (const auto& tensor : logical) counts[tensor["encoding"].get<std::string>()] += 1;
    out << "encodings:   ";
    bool first = true;
    for (const auto& [encoding, count] : counts) {
        out << (first ? "" : ", ") << encoding << " x" << count;
        first = false;
    }
    out << '\n';
}

void render_model(std::ostringstream& out, const json& report) {
    const json& section = report["qwen4_exp"];
    if (section.is_null()) {
        std::string model_type = report.value("model_type", "");
        out << "model:       " << (model_type.empty() ? "unknown (no model_type)" : model_type) << '\n';
        return;
    }
    for (const auto& line : section["summary"]) out << line.get<std::string>() << '\n';
}

void render_preparation(std::ostringstream& out, const json& preparation) {
    bool supported = preparation.value("supported", false);
    out << "preparation: " << (supported ? "supported" : "not supported");
    if (preparation.contains("source_format")) out << " (" << preparation["source_format"].get<std::string>() << " source)";
    out << '\n';
    for (const auto& reason : preparation.value("reasons", json::array())) out << "  - " << reason.get<std::string>() << '\n';
    for (const auto& step : preparation.value("steps", json::array())) out << "  - " << step.get<std::string>() << '\n';
}

void render_tensors(std::ostringstream& out, const json& tensors, bool show_file) {
    out << "tensors:\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> heading = {"name", "dtype", "shape", "bytes", "range"};
    if (show_file) heading.push_back("file");
    heading.push_back("role");
    rows.push_back(heading);
    for (const auto& tensor : tensors) {
        std::vector<std::string> row = {
            tensor["name"].get<std::string>(), tensor["dtype"].get<std::string>(), shape_text(tensor["shape"]),
            std::to_string(tensor["n_bytes"].get<uint64_t>()),
            std::to_string(tensor["offset"].get<uint64_t>()) + ".." + std::to_string(tensor["end"].get<uint64_t>())};
        if (show_file) row.push_back(tensor["file"].get<std::string>());
        row.push_back(tensor.value("role", "-"));
        rows.push_back(std::move(row));
    }
    render_table(out, rows);
}

}  // namespace

std::string format_bytes(uint64_t n_bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(n_bytes);
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    char buffer[32];
    if (unit == 0) {
        std::snprintf(buffer, sizeof(buffer), "%llu B", static_cast<unsigned long long>(n_bytes));
    } else {
        std::snprintf(buffer, sizeof(buffer), "%.1f %s", value, units[unit]);
    }
    return buffer;
}

std::string render_report_text(const json& report) {
    std::ostringstream out;
    std::string kind = report["kind"].get<std::string>();
    out << (kind == "checkpoint" ? "checkpoint:  " : "safetensors: ") << report["path"].get<std::string>() << '\n';
    render_files(out, report);
    if (kind == "checkpoint") {
        render_model(out, report);
        render_encodings(out, report["logical_tensors"]);
        render_preparation(out, report["preparation"]);
        for (const auto& warning : report.value("warnings", json::array())) {
            out << "warning:     " << warning.get<std::string>() << '\n';
        }
    }
    render_tensors(out, report["tensors"], kind == "checkpoint" && report["files"].size() > 1);
    return out.str();
}

}  // namespace cherenkov::model_data::inspect
