#include "model_data/inspect/inspect_target.h"

#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "model_data/gguf/gguf_file.h"
#include "model_data/inspect/checkpoint_report.h"
#include "model_data/inspect/gguf_report.h"
#include "model_data/inspect/report_text.h"
#include "model_data/inspect/store_report.h"

namespace cherenkov::model_data::inspect {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_gguf_magic(const ByteSource& source) {
    if (source.size() < 4) return false;
    std::byte magic[4];
    source.read(0, magic);
    return std::memcmp(magic, "GGUF", 4) == 0;
}

InspectOutput from_report(nlohmann::json report) {
    InspectOutput output;
    output.text = render_report_text(report);
    output.report = std::move(report);
    return output;
}

InspectOutput inspect_file(std::shared_ptr<const ByteSource> source) {
    if (has_gguf_magic(*source)) {
        gguf::GgufFile file = gguf::read_gguf(*source);
        return InspectOutput{gguf_report_json(file), gguf_report_text(file)};
    }
    if (ends_with(source->name(), ".gguf")) {
        throw_corrupt(source->name() + ": not a GGUF file (the first 4 bytes are not 'GGUF')");
    }
    return from_report(inspect_safetensors_file(std::move(source)));
}

}  // namespace

InspectOutput inspect_target(const std::string& target, const HttpOptions& http_options) {
    if (is_http_url(target)) {
        if (ends_with(target, ".gguf")) throw_unsupported(target + ": remote GGUF inspection is not supported");
        if (ends_with(target, ".safetensors")) {
            return inspect_file(std::shared_ptr<const ByteSource>(open_http_source(target, http_options)));
        }
        auto store = open_http_store(target, http_options);
        return from_report(inspect_checkpoint(*store));
    }
    std::error_code ec;
    if (std::filesystem::is_directory(target, ec)) {
        if (is_store_directory(target)) return inspect_store(target);
        auto store = open_directory_store(target);
        return from_report(inspect_checkpoint(*store));
    }
    if (!std::filesystem::exists(target, ec)) throw_not_found(target + ": no such file or directory");
    return inspect_file(std::shared_ptr<const ByteSource>(open_file_source(target)));
}

}  // namespace cherenkov::model_data::inspect
