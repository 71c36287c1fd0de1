// Q3 / Q2 expert tables derived once from the Q4 records (dequantize, requantize with the MLX
// affine algorithm at 3 or 2 bits, group 64). Several widths share one pass over experts.bin.
// Each table is written beside the store as experts{bits}.bin.partial-<pid>, synced, renamed, and
// its manifest{bits}.json written last, so a crash leaves no valid-looking half table.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "store/manifest/store_manifest.h"
#include "store/packer/packer.h"

namespace cherenkov::store {

std::vector<LowBitManifest> derive_lowbit_stores(const std::string& store_dir,
                                                 const StoreManifest& base,
                                                 std::span<const int> bits, unsigned n_threads,
                                                 const ProgressCallback& progress);

}  // namespace cherenkov::store
