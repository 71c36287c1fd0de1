#include "store/packer/source_model.h"

#include <filesystem>

#include "base/error.h"

namespace cherenkov::store {

namespace q4 = model_data::qwen4_exp;

uint64_t total_rows(const model_data::TensorInfo& info) {
    uint64_t rows = 1;
    for (size_t dim = 0; dim + 1 < info.shape.size(); ++dim) rows *= info.shape[dim];
    return rows;
}

RowSlice row_slice(const model_data::LocatedTensor& tensor, uint64_t first_row, uint64_t n_rows) {
    const uint64_t rows = total_rows(*tensor.tensor);
    if (rows == 0 || tensor.tensor->n_bytes() % rows != 0 || first_row + n_rows > rows) {
        throw_corrupt(tensor.file->name() + ": tensor '" + tensor.tensor->name + "': rows [" +
                      std::to_string(first_row) + ", " + std::to_string(first_row + n_rows) +
                      ") outside its " + std::to_string(rows) + " rows");
    }
    return RowSlice{tensor.file, tensor.tensor, first_row, n_rows, tensor.tensor->n_bytes() / rows};
}

RowSlice whole_tensor(const model_data::LocatedTensor& tensor) {
    return row_slice(tensor, 0, total_rows(*tensor.tensor));
}

void RowSlice::read_rows(uint64_t begin, std::span<std::byte> out) const {
    CHERENKOV_ASSERT(out.size() % row_bytes == 0 && begin + out.size() / row_bytes <= n_rows,
                     "row read in range");
    file->read_tensor_bytes(*info, (first_row + begin) * row_bytes, out);
}

std::optional<model_data::LocatedTensor> SourceModel::find(const std::string& name) const {
    return checkpoint->find(name);
}

model_data::LocatedTensor SourceModel::require(const std::string& name) const {
    auto found = checkpoint->find(name);
    if (!found) throw_not_found(path + ": tensor '" + name + "' is missing");
    return *found;
}

SourceModel open_source_model(const std::string& directory) {
    std::error_code ec;
    if (!std::filesystem::is_directory(directory, ec)) {
        throw_not_found(directory + ": not a checkpoint directory");
    }
    SourceModel source;
    source.path = directory;
    source.store = model_data::open_directory_store(directory);
    if (!source.store->exists("config.json"))
        throw_not_found(directory + ": config.json is missing");
    const std::string config_name = directory + "/config.json";
    source.config_document =
        nlohmann::json::parse(source.store->read_text("config.json"), nullptr, false);
    if (source.config_document.is_discarded() || !source.config_document.is_object()) {
        throw_invalid(config_name + ": not a JSON object");
    }
    source.config = q4::parse_config(source.config_document, config_name);
    source.quantization =
        model_data::parse_quantization_config(source.config_document, config_name);
    source.checkpoint = std::make_unique<model_data::SafetensorsCheckpoint>(
        model_data::SafetensorsCheckpoint::open(*source.store));

    std::vector<q4::TensorEntry> entries;
    for (const model_data::SafetensorsFile& file : source.checkpoint->files()) {
        for (const model_data::TensorInfo& tensor : file.tensors()) {
            entries.push_back({tensor.name, std::string(model_data::dtype_name(tensor.dtype)),
                               std::vector<int64_t>(tensor.shape.begin(), tensor.shape.end())});
            source.total_bytes += tensor.n_bytes();
        }
    }
    q4::LayoutOptions options;
    const auto& quantization = source.quantization;
    options.bits_of = [&quantization](std::string_view module) -> std::optional<int> {
        if (!quantization) return std::nullopt;
        auto params = quantization->params_for(module);
        if (!params) return std::nullopt;
        return params->bits;
    };
    source.layout = q4::describe_layout(source.config, entries, options);
    q4::require_loadable(source.layout, directory);
    source.mlx = source.layout.quantized;
    if (source.mlx && !source.quantization) {
        throw_invalid(config_name + ": packed (U32) weights but no \"quantization\" section");
    }
    if (source.mlx && source.quantization->defaults.mode != model_data::QuantMode::Affine) {
        throw_unsupported(
            config_name + ": quantization mode " +
            std::string(model_data::quant_mode_name(source.quantization->defaults.mode)) +
            " is not supported; Cherenkov packs MLX affine checkpoints");
    }
    return source;
}

}  // namespace cherenkov::store
