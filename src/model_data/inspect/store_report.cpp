#include "model_data/inspect/store_report.h"

#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "base/file.h"

namespace cherenkov::model_data::inspect {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "cherenkov-store";

json read_manifest(const std::string& path) {
    json document = json::parse(read_text_file(path), nullptr, false);
    if (document.is_discarded() || !document.is_object()) throw_corrupt(path + ": not valid JSON");
    return document;
}

uint64_t size_on_disk(const fs::path& path) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    return ec ? 0 : size;
}

std::string mib(uint64_t bytes) {
    std::ostringstream out;
    out.precision(1);
    out << std::fixed << static_cast<double>(bytes) / (1 << 20) << " MiB";
    return out.str();
}

}  // namespace

bool is_store_directory(const std::string& directory) {
    const fs::path manifest = fs::path(directory) / "manifest.json";
    std::error_code ec;
    if (!fs::is_regular_file(manifest, ec)) return false;
    json document = json::parse(read_text_file(manifest.string()), nullptr, false);
    return document.is_object() && document.value("format", json()).is_string() &&
           document["format"].get<std::string>() == kFormat;
}

InspectOutput inspect_store(const std::string& directory) {
    const fs::path root(directory);
    const std::string manifest_path = (root / "manifest.json").string();
    const json manifest = read_manifest(manifest_path);
    if (!manifest.contains("files") || !manifest["files"].is_object() ||
        !manifest.contains("experts") || !manifest["experts"].is_object() ||
        !manifest.contains("dense") || !manifest["dense"].is_array()) {
        throw_corrupt(manifest_path + ": missing files, experts or dense");
    }
    json files = json::array();
    bool sizes_ok = true;
    for (const auto& [name, size] : manifest["files"].items()) {
        const uint64_t actual = size_on_disk(root / name);
        const bool ok = size.is_number_unsigned() && size.get<uint64_t>() == actual;
        sizes_ok = sizes_ok && ok;
        files.push_back({{"name", name}, {"manifest_bytes", size}, {"bytes", actual}, {"ok", ok}});
    }
    json variants = json::array();
    for (int bits : {3, 2}) {
        const fs::path low = root / ("manifest" + std::to_string(bits) + ".json");
        std::error_code ec;
        if (!fs::is_regular_file(low, ec)) continue;
        const json document = read_manifest(low.string());
        variants.push_back(
            {{"bits", bits},
             {"experts_bytes", document.value("experts_bytes", json())},
             {"bytes", size_on_disk(root / ("experts" + std::to_string(bits) + ".bin"))}});
    }
    json report = {{"kind", "cherenkov-store"},
                   {"path", directory},
                   {"version", manifest.value("version", json())},
                   {"source", manifest.value("source", json())},
                   {"norms_folded", manifest.value("norms_folded", json())},
                   {"has_mtp", manifest.value("has_mtp", json())},
                   {"files", files},
                   {"sizes_ok", sizes_ok},
                   {"experts", manifest["experts"]},
                   {"lowbit_experts", variants},
                   {"dense", manifest["dense"]},
                   {"ngram", manifest.value("ngram", json::array())}};

    const json& experts = manifest["experts"];
    std::ostringstream text;
    text << "Cherenkov store " << directory << " (format version "
         << manifest.value("version", json()).dump() << ")\n";
    if (manifest.contains("source") && manifest["source"].is_object()) {
        text << "  source: " << manifest["source"].value("kind", std::string("?")) << " "
             << manifest["source"].value("path", std::string("?")) << "\n";
    }
    text << "  experts: " << experts.value("n_trunk_layers", json()).dump() << " trunk + "
         << experts.value("n_mtp_layers", json()).dump() << " MTP layers x "
         << experts.value("n_experts", json()).dump() << " experts, Q"
         << experts.value("bits", json()).dump() << " g"
         << experts.value("group_size", json()).dump() << ", record "
         << experts.value("record_bytes", json()).dump() << " bytes\n";
    for (const json& variant : variants) {
        text << "  low-bit experts: Q" << variant["bits"].dump() << " ("
             << mib(variant["bytes"].get<uint64_t>()) << ")\n";
    }
    text << "  dense tensors: " << manifest["dense"].size()
         << ", n-gram tables: " << manifest.value("ngram", json::array()).size() << "\n";
    for (const json& file : files) {
        text << "  " << file["name"].get<std::string>() << ": "
             << mib(file["bytes"].get<uint64_t>())
             << (file["ok"].get<bool>() ? "" : "  (size differs from the manifest)") << "\n";
    }
    return InspectOutput{std::move(report), text.str()};
}

}  // namespace cherenkov::model_data::inspect
