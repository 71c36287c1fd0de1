// A checkpoint's set of safetensors files: sharded through model.safetensors.index.json
// (docs/formats.md §1.6), a single model.safetensors, or every *.safetensors in the store.
// The weight map is trusted; shards are checked against it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model_data/safetensors/safetensors_file.h"
#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {

inline constexpr std::string_view kShardIndexName = "model.safetensors.index.json";

struct ShardIndex {
    std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
    std::optional<uint64_t> total_size;
    std::vector<std::string> shard_names;  // distinct, in first-seen order of sorted tensor names
};

ShardIndex parse_shard_index(std::string_view json_text, const std::string& file_name);

struct LocatedTensor {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* tensor = nullptr;
};

class SafetensorsCheckpoint {
public:
    // Lookups point into the files, so the checkpoint moves but never copies.
    SafetensorsCheckpoint(SafetensorsCheckpoint&&) = default;
    SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) = default;
    SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
    SafetensorsCheckpoint& operator=(const SafetensorsCheckpoint&) = delete;

    // Reads every shard header (up to `max_parallel_reads` at once, which matters for remote
    // stores) and cross-checks them with the index.
    static SafetensorsCheckpoint open(const ObjectStore& store, int max_parallel_reads = 8);

    const std::vector<SafetensorsFile>& files() const { return files_; }
    const std::optional<ShardIndex>& index() const { return index_; }
    // Non-fatal findings: unreferenced model*.safetensors files, total_size mismatches.
    const std::vector<std::string>& warnings() const { return warnings_; }

    std::optional<LocatedTensor> find(std::string_view name) const;
    size_t n_tensors() const { return by_name_.size(); }

private:
    SafetensorsCheckpoint() = default;

    std::vector<SafetensorsFile> files_;
    std::optional<ShardIndex> index_;
    std::vector<std::string> warnings_;
    std::unordered_map<std::string, LocatedTensor> by_name_;
};

}  // namespace cherenkov::model_data
