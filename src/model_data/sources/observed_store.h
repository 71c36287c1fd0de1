// An ObjectStore decorator that reports every completed read, for progress displays (for example
// "3/8 safetensors headers read" while a remote checkpoint is inspected). Observer calls are
// serialized, so the observer needs no locking of its own even when reads run in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data {

// (object name as passed to open(), offset, n_bytes), after the read succeeded.
using ReadObserver = std::function<void(const std::string&, uint64_t, uint64_t)>;

std::unique_ptr<ObjectStore> observe_reads(std::unique_ptr<ObjectStore> inner,
                                           ReadObserver observer);

}  // namespace cherenkov::model_data
