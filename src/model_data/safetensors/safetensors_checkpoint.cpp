#include "model_data/safetensors/safetensors_checkpoint.h"

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

using nlohmann::json;

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::vector<std::string> choose_shards(const ObjectStore& store, const std::optional<ShardIndex>& index) {
    if (index) return index->shard_names;
    if (store.exists("model.safetensors")) return {"model.safetensors"};
    std::vector<std::string> names;
    if (auto listing = store.list()) {
        for (const auto& name : *listing) {
            if (ends_with(name, ".safetensors")) names.push_back(name);
        }
    }
    std::sort(names.begin(), names.end());
    if (names.empty()) {
        throw_not_found(store.location() + ": no " + std::string(kShardIndexName) +
                        ", model.safetensors or *.safetensors file");
    }
    return names;
}

}  // namespace

ShardIndex parse_shard_index(std::string_view json_text, const std::string& file_name) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        throw_corrupt(file_name + ": not valid JSON: " + e.what());
    }
    if (!root.is_object()) throw_corrupt(file_name + ": expected a JSON object");
    ShardIndex index;
    auto map_it = root.find("weight_map");
    if (map_it == root.end() || !map_it->is_object()) throw_corrupt(file_name + ": weight_map: missing or not an object");
    if (map_it->empty()) throw_corrupt(file_name + ": weight_map: empty");
    std::set<std::string> seen_shards;
    for (const auto& [tensor, shard] : map_it->items()) {
        if (!shard.is_string()) throw_corrupt(file_name + ": weight_map." + tensor + ": expected a file name");
        const auto& shard_name = shard.get_ref<const std::string&>();
        if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "." || shard_name == "..") {
            throw_corrupt(file_name + ": weight_map." + tensor + ": '" + shard_name + "' is not a plain file name");
        }
        index.weight_map.emplace(tensor, shard_name);
        if (seen_shards.insert(shard_name).second) index.shard_names.push_back(shard_name);
    }
    auto metadata_it = root.find("metadata");
    if (metadata_it != root.end() && !metadata_it->is_null()) {
        if (!metadata_it->is_object()) throw_corrupt(file_name + ": metadata: expected an object");
        auto total_it = metadata_it->find("total_size");
        if (total_it != metadata_it->end() && !total_it->is_null()) {
            if (!total_it->is_number_integer() || total_it->get<int64_t>() < 0) {
                throw_corrupt(file_name + ": metadata.total_size: expected a non-negative integer");
            }
            index.total_size = total_it->get<uint64_t>();
        }
    }
    return index;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const ObjectStore& store, int max_parallel_reads) {
    SafetensorsCheckpoint checkpoint;
    const std::string index_name(kShardIndexName);
    if (store.exists(index_name)) {
        checkpoint.index_ = parse_shard_index(store.read_text(index_name), store.location() + "/" + index_name);
    }
    std::vector<std::string> shard_names = choose_shards(store, checkpoint.index_);

    // Header reads are independent; bound how many run at once (remote stores pay latency).
    checkpoint.files_.reserve(shard_names.size());
    size_t batch = static_cast<size_t>(std::max(1, max_parallel_reads));
    for (size_t start = 0; start < shard_names.size(); start += batch) {
        std::vector<std::future<SafetensorsFile>> pending;
        for (size_t position = start; position < std::min(shard_names.size(), start + batch); ++position) {
            pending.push_back(std::async(std::launch::async, [&store, name = shard_names[position]] {
                return SafetensorsFile::open(std::shared_ptr<const ByteSource>(store.open(name)));
            }));
        }
        for (auto& future : pending) checkpoint.files_.push_back(future.get());
    }

    uint64_t total_bytes = 0;
    for (size_t position = 0; position < checkpoint.files_.size(); ++position) {
        const SafetensorsFile& file = checkpoint.files_[position];
        for (const auto& tensor : file.tensors()) {
            total_bytes += tensor.n_bytes();
            auto [it, inserted] = checkpoint.by_name_.emplace(tensor.name, LocatedTensor{&file, &tensor});
            if (!inserted) {
                throw_corrupt(store.location() + ": tensor '" + tensor.name + "' appears in both " +
                              it->second.file->name() + " and " + file.name());
            }
            if (!checkpoint.index_) continue;
            auto mapped = checkpoint.index_->weight_map.find(tensor.name);
            if (mapped == checkpoint.index_->weight_map.end()) {
                checkpoint.warnings_.push_back(file.name() + ": tensor '" + tensor.name +
                                               "' is not in the weight map");
            } else if (mapped->second != shard_names[position]) {
                throw_corrupt(file.name() + ": tensor '" + tensor.name + "' is mapped to " + mapped->second);
            }
        }
    }
    if (checkpoint.index_) {
        for (const auto& [tensor, shard] : checkpoint.index_->weight_map) {
            if (!checkpoint.by_name_.count(tensor)) {
                throw_corrupt(store.location() + "/" + index_name + ": weight_map names tensor '" + tensor +
                              "' in " + shard + ", which does not contain it");
            }
        }
        if (checkpoint.index_->total_size && *checkpoint.index_->total_size != total_bytes) {
            checkpoint.warnings_.push_back(index_name + ": metadata.total_size is " +
                                           std::to_string(*checkpoint.index_->total_size) +
                                           " but the tensors hold " + std::to_string(total_bytes) + " bytes");
        }
        // mlx-lm loads every model*.safetensors regardless of the index (docs/formats.md §1.6).
        if (auto listing = store.list()) {
            std::set<std::string> used(shard_names.begin(), shard_names.end());
            for (const auto& name : *listing) {
                if (name.rfind("model", 0) == 0 && ends_with(name, ".safetensors") && !used.count(name)) {
                    checkpoint.warnings_.push_back(name + " is not referenced by the shard index and is ignored");
                }
            }
        }
    }
    return checkpoint;
}

std::optional<LocatedTensor> SafetensorsCheckpoint::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
}

}  // namespace cherenkov::model_data
