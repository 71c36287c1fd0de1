// Builds safetensors bytes in tests: tensors laid out back to back in the order added, with a
// JSON header the test may also replace wholesale to produce malformed files.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cherenkov::testing {

class SafetensorsWriter {
public:
    SafetensorsWriter& add(const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
                           const std::string& bytes) {
        uint64_t begin = data_.size();
        data_ += bytes;
        header_[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, data_.size()}}};
        return *this;
    }

    // Adds a tensor whose bytes are (index * 7 + seed) mod 251, of the size the shape needs.
    SafetensorsWriter& add_filled(const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
                                  int bytes_per_element, int seed = 0) {
        uint64_t n = static_cast<uint64_t>(bytes_per_element);
        for (uint64_t dim : shape) n *= dim;
        std::string bytes(n, '\0');
        for (uint64_t index = 0; index < n; ++index) bytes[index] = static_cast<char>((index * 7 + seed) % 251);
        return add(name, dtype, std::move(shape), bytes);
    }

    nlohmann::json& header() { return header_; }
    std::string& data() { return data_; }

    std::string bytes() const { return bytes_with_header(header_.dump()); }

    std::string bytes_with_header(const std::string& json_text) const {
        std::string out(8, '\0');
        uint64_t n = json_text.size();
        for (int index = 0; index < 8; ++index) out[index] = static_cast<char>((n >> (8 * index)) & 0xFF);
        return out + json_text + data_;
    }

private:
    nlohmann::json header_ = nlohmann::json::object();
    std::string data_;
};

}  // namespace cherenkov::testing
