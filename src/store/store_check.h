// Validation of an existing store before it is reused or described: manifest, config, file sizes
// and a sample of expert records and dense tensors decoded. Every failure is Corrupt (or
// NotFound for a missing file) and names the store file and what is wrong.
#pragma once

#include <string>

#include "model_data/qwen4_exp/config.h"
#include "store/manifest/store_manifest.h"

namespace cherenkov::store {

// True when `directory` holds a manifest.json (a store, valid or not).
bool looks_like_store(const std::string& directory);

StoreManifest validate_store(const std::string& directory);

// A store as validate_store checked it, with the parsed config.json too, so that a loader reads
// manifest.json and config.json once. `config`: the directory's config.json parsed already by
// the caller (checked against the manifest, not read again); null: read here.
struct CheckedStore {
    StoreManifest manifest;
    model_data::qwen4_exp::Config config;
};
CheckedStore check_store(const std::string& directory,
                         const model_data::qwen4_exp::Config* config = nullptr);
// validate_store in two parts: everything but config.json (for a store whose config.json is
// being repaired), and config.json against the manifest's expert layout.
StoreManifest validate_store_files(const std::string& directory);
void validate_store_config(const std::string& directory, const StoreManifest& manifest);

// Validates experts{bits}.bin + manifest{bits}.json against the base store.
LowBitManifest validate_lowbit_store(const std::string& directory, int bits,
                                     const StoreManifest& base);

// Checks a record's scales and biases are finite and its first rows decode to finite values.
// `record` holds one record laid out as `layout`; `what` names it in errors.
void check_record(std::span<const std::byte> record, const ExpertLayout& layout,
                  const std::string& what);

}  // namespace cherenkov::store
