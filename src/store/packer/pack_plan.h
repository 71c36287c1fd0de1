// What the packer will write, decided before any byte is written: every dense tensor's encoding
// and byte range in dense.bin, every n-gram table's range in ngram.bin, the expert record layout
// and where each expert's projections come from in the source. The plan's sizes drive the disk
// space check; its manifest is published once the bytes are on disk.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "store/manifest/store_manifest.h"
#include "store/packer/source_model.h"

namespace cherenkov::store {

enum class DenseAction {
    Quantize,    // float rows -> Q4 group 64
    CopyAffine,  // MLX codes / scales / biases kept byte for byte
    ToF32,       // float -> f32
    FoldToF32,   // zero-centred norm: 1 + w, in float32
    CopyI64,     // int64 buffers
};

struct DenseJob {
    DenseTensor entry;
    DenseAction action = DenseAction::ToF32;
    model_data::Dtype source_dtype = model_data::Dtype::BF16;
    RowSlice weight;  // the values, or the codes for CopyAffine
    RowSlice scales;  // CopyAffine only
    RowSlice biases;  // CopyAffine only
};

// One source piece of an n-gram table: float rows, or MLX group-32 codes + scales + biases.
struct NgramPiece {
    bool quantized = false;
    model_data::Dtype source_dtype = model_data::Dtype::BF16;
    RowSlice weight;
    RowSlice scales;
    RowSlice biases;
};

struct NgramJob {
    NgramTable entry;
    std::vector<NgramPiece> pieces;  // in row order
};

// Where one projection of one expert comes from.
struct ProjectionSource {
    bool quantized = false;
    model_data::Dtype source_dtype = model_data::Dtype::BF16;
    RowSlice weight;  // float rows or codes
    RowSlice scales;
    RowSlice biases;
};

struct ExpertSource {
    ProjectionSource gate;
    ProjectionSource up;
    ProjectionSource down;
};

struct PackPlan {
    StoreManifest manifest;  // sizes and ranges filled; identity filled by the packer
    std::vector<DenseJob> dense;
    std::vector<NgramJob> ngram;
    uint64_t source_bytes = 0;  // bytes the packer will read (progress total)
    bool disable_mtp_in_config = false;
    // (mtp, layer, role, expert) -> stored name of the expert tensors (Weight component).
    std::map<std::tuple<bool, int64_t, int, int64_t>, std::string> expert_tensors;

    uint64_t output_bytes() const {
        return manifest.dense_bytes + manifest.ngram_bytes + manifest.experts_bytes;
    }
};

// Throws InvalidInput / Unsupported naming the tensor when the source cannot be packed (wrong
// group size, unsupported dtype or expert width).
PackPlan plan_pack(const SourceModel& source);

// `layer` indexes the expert table (MTP layers after the trunk).
ExpertSource locate_expert(const SourceModel& source, const PackPlan& plan, int64_t layer,
                           int64_t expert);

}  // namespace cherenkov::store
