#include "model_data/safetensors/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

using nlohmann::json;

uint64_t read_u64_le(const std::byte* bytes) {
    uint64_t value = 0;
    for (int index = 7; index >= 0; --index) value = (value << 8) | std::to_integer<uint64_t>(bytes[index]);
    return value;
}

// Parses the header JSON, rejecting duplicate top-level keys (the spec disallows them and
// nlohmann would silently keep the last one).
json parse_header_json(std::string_view text, const std::string& file_name) {
    std::set<std::string> seen_keys;
    std::string duplicate;
    json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!seen_keys.insert(key).second) duplicate = key;
        }
        return true;
    };
    json root;
    try {
        root = json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
        throw_corrupt(file_name + ": header is not valid JSON: " + e.what());
    }
    if (!duplicate.empty()) throw_corrupt(file_name + ": header: duplicate key '" + duplicate + "'");
    if (!root.is_object()) throw_corrupt(file_name + ": header: expected a JSON object");
    return root;
}

uint64_t as_u64(const json& value, const std::string& where) {
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
    throw_corrupt(where + ": expected a non-negative integer, got " + value.dump());
}

TensorInfo parse_tensor_entry(const std::string& name, const json& entry, const std::string& where) {
    if (!entry.is_object()) throw_corrupt(where + ": expected an object");
    TensorInfo tensor;
    tensor.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) throw_corrupt(where + ".dtype: missing or not a string");
    auto dtype = parse_dtype(dtype_it->get_ref<const std::string&>());
    if (!dtype) throw_corrupt(where + ".dtype: unknown dtype '" + dtype_it->get<std::string>() + "'");
    tensor.dtype = *dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) throw_corrupt(where + ".shape: missing or not an array");
    unsigned __int128 n_bits = static_cast<unsigned>(dtype_bits(tensor.dtype));
    for (size_t axis = 0; axis < shape_it->size(); ++axis) {
        uint64_t dim = as_u64((*shape_it)[axis], where + ".shape[" + std::to_string(axis) + "]");
        tensor.shape.push_back(dim);
        n_bits *= dim;
        if (n_bits > (static_cast<unsigned __int128>(1) << 80)) {
            throw_corrupt(where + ".shape: element count overflows");
        }
        tensor.n_elements *= dim;
    }
    if (n_bits % 8 != 0) throw_corrupt(where + ": total bit count is not a multiple of 8");

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
        throw_corrupt(where + ".data_offsets: missing or not a pair");
    }
    tensor.data_begin = as_u64((*offsets_it)[0], where + ".data_offsets[0]");
    tensor.data_end = as_u64((*offsets_it)[1], where + ".data_offsets[1]");
    if (tensor.data_end < tensor.data_begin) {
        throw_corrupt(where + ".data_offsets: end " + std::to_string(tensor.data_end) + " before begin " +
                      std::to_string(tensor.data_begin));
    }
    unsigned __int128 expected_bytes = n_bits / 8;
    if (expected_bytes != tensor.n_bytes()) {
        throw_corrupt(where + ": " + std::string(dtype_name(tensor.dtype)) + " shape needs " +
                      std::to_string(static_cast<uint64_t>(expected_bytes)) + " bytes, data_offsets span " +
                      std::to_string(tensor.n_bytes()));
    }
    return tensor;
}

}  // namespace

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
    auto it = index_by_name.find(std::string(name));
    return it == index_by_name.end() ? nullptr : &tensors[it->second];
}

SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t header_bytes,
                                           uint64_t file_size, const std::string& file_name) {
    SafetensorsHeader header;
    header.header_bytes = header_bytes;
    header.data_offset = 8 + header_bytes;
    header.file_size = file_size;
    json root = parse_header_json(json_text, file_name);

    for (const auto& [key, value] : root.items()) {
        if (key == "__metadata__") {
            if (!value.is_object()) throw_corrupt(file_name + ": header.__metadata__: expected an object");
            for (const auto& [meta_key, meta_value] : value.items()) {
                if (!meta_value.is_string()) {
                    throw_corrupt(file_name + ": header.__metadata__." + meta_key + ": expected a string");
                }
                header.metadata[meta_key] = meta_value.get<std::string>();
            }
            continue;
        }
        header.tensors.push_back(parse_tensor_entry(key, value, file_name + ": tensor '" + key + "'"));
    }

    // The tensors must tile the data section exactly: no gaps, no overlaps, no trailing bytes.
    std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
    });
    uint64_t expected_begin = 0;
    for (const auto& tensor : header.tensors) {
        if (tensor.data_begin < expected_begin) {
            throw_corrupt(file_name + ": tensor '" + tensor.name + "' at data bytes [" +
                          std::to_string(tensor.data_begin) + ", " + std::to_string(tensor.data_end) +
                          ") overlaps the previous tensor, which ends at " + std::to_string(expected_begin));
        }
        if (tensor.data_begin > expected_begin) {
            throw_corrupt(file_name + ": gap in the data section before tensor '" + tensor.name +
                          "' (data bytes [" + std::to_string(expected_begin) + ", " +
                          std::to_string(tensor.data_begin) + ") belong to no tensor)");
        }
        expected_begin = tensor.data_end;
    }
    for (size_t position = 0; position < header.tensors.size(); ++position) {
        header.index_by_name.emplace(header.tensors[position].name, position);
    }
    uint64_t data_bytes = file_size - header.data_offset;
    if (expected_begin != data_bytes) {
        if (expected_begin > data_bytes) {
            const auto& last = header.tensors.back();
            throw_corrupt(file_name + ": tensor '" + last.name + "' ends at byte " +
                          std::to_string(header.data_offset + last.data_end) + ", file has " +
                          std::to_string(file_size));
        }
        throw_corrupt(file_name + ": " + std::to_string(data_bytes - expected_begin) +
                      " trailing bytes after the last tensor");
    }
    return header;
}

SafetensorsFile SafetensorsFile::open(std::shared_ptr<const ByteSource> source) {
    const std::string& file_name = source->name();
    uint64_t file_size = source->size();
    if (file_size < 8) {
        throw_corrupt(file_name + ": " + std::to_string(file_size) +
                      " bytes is too short for a safetensors file (needs an 8-byte header length)");
    }
    std::byte length_bytes[8];
    source->read(0, length_bytes);
    uint64_t header_bytes = read_u64_le(length_bytes);
    if (header_bytes < 2 || header_bytes > kMaxSafetensorsHeaderBytes) {
        throw_corrupt(file_name + ": header length " + std::to_string(header_bytes) +
                      " is outside [2, " + std::to_string(kMaxSafetensorsHeaderBytes) + "]");
    }
    if (header_bytes > file_size - 8) {
        throw_corrupt(file_name + ": header length " + std::to_string(header_bytes) +
                      " runs past the end of the file (" + std::to_string(file_size) + " bytes)");
    }
    std::vector<std::byte> json_bytes = source->read_range(8, header_bytes);
    std::string_view json_text(reinterpret_cast<const char*>(json_bytes.data()), json_bytes.size());
    SafetensorsHeader header = parse_safetensors_header(json_text, header_bytes, file_size, file_name);
    return SafetensorsFile(std::move(source), std::move(header));
}

const TensorInfo& SafetensorsFile::tensor(std::string_view name) const {
    const TensorInfo* found = header_.find(name);
    if (found == nullptr) throw_not_found(this->name() + ": no tensor '" + std::string(name) + "'");
    return *found;
}

void SafetensorsFile::read_tensor_bytes(const TensorInfo& tensor, uint64_t offset_in_tensor,
                                        std::span<std::byte> out) const {
    if (offset_in_tensor > tensor.n_bytes() || out.size() > tensor.n_bytes() - offset_in_tensor) {
        throw_invalid(name() + ": read of " + std::to_string(out.size()) + " bytes at " +
                      std::to_string(offset_in_tensor) + " is outside tensor '" + tensor.name + "' (" +
                      std::to_string(tensor.n_bytes()) + " bytes)");
    }
    source_->read(header_.file_begin(tensor) + offset_in_tensor, out);
}

std::vector<std::byte> SafetensorsFile::read_tensor(const TensorInfo& tensor) const {
    std::vector<std::byte> bytes(tensor.n_bytes());
    read_tensor_bytes(tensor, 0, bytes);
    return bytes;
}

TensorView SafetensorsFile::map_tensor(const TensorInfo& tensor) const {
    auto mapping = source_->mapping();
    if (!mapping) throw_unsupported(name() + ": cannot map a non-local source");
    auto bytes = mapping->bytes();
    if (bytes.size() != header_.file_size) {
        throw_corrupt(name() + ": file changed size since its header was read");
    }
    return TensorView{mapping, &tensor, bytes.subspan(header_.file_begin(tensor), tensor.n_bytes())};
}

}  // namespace cherenkov::model_data
