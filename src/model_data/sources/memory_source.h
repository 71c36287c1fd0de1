// A ByteSource over bytes held in memory: for fuzz targets, tests, and objects already
// downloaded whole.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {

// `name` stands in for a path in error messages. Reads past the end throw Corrupt naming it.
std::unique_ptr<ByteSource> open_memory_source(std::string name, std::vector<std::byte> bytes);

}  // namespace cherenkov::model_data
