#include "store/lowbit/lowbit_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"
#include "store/packer/output_file.h"
#include "store/packer/row_quantizer.h"
#include "store/packer/work_pool.h"

namespace cherenkov::store {

namespace {

// Records are read, converted and written in batches of about this many base bytes (and at
// least one record per thread): one large sequential read, one large write per table.
constexpr uint64_t kBatchBytes = uint64_t{32} << 20;

// Zeroed bytes starting on an OutputFile::kDirectAlign boundary, so whole-record batches can be
// written with O_DIRECT.
class AlignedBytes {
public:
    AlignedBytes() = default;
    explicit AlignedBytes(size_t n_bytes) : storage_(n_bytes + OutputFile::kDirectAlign) {
        const auto address = reinterpret_cast<uintptr_t>(storage_.data());
        offset_ = (OutputFile::kDirectAlign - address % OutputFile::kDirectAlign) %
                  OutputFile::kDirectAlign;
        size_ = n_bytes;
    }
    std::span<std::byte> bytes() { return std::span(storage_).subspan(offset_, size_); }

private:
    std::vector<std::byte> storage_;
    size_t offset_ = 0;
    size_t size_ = 0;
};

struct Target {
    LowBitManifest manifest;
    std::string final_path;
    std::unique_ptr<OutputFile> out;
    AlignedBytes batch;  // converted records of the current batch
};

const ProjectionLayout& projection(const ExpertLayout& layout, int index) {
    return index == 0 ? layout.gate : index == 1 ? layout.up : layout.down;
}

// One projection of one record: dequantize the Q4 rows to float (the calling thread's scratch),
// then requantize them row by row into each target's record.
void convert_projection(std::span<const std::byte> base_record, const ExpertLayout& from,
                        int projection_index, std::vector<Target>& targets, uint64_t record) {
    thread_local std::vector<float> values;
    const ProjectionLayout& source = projection(from, projection_index);
    values.resize(source.rows * source.cols);
    dequantize_rows(base_record.subspan(source.codes.offset, source.codes.n_bytes),
                    base_record.subspan(source.scales.offset, source.scales.n_bytes),
                    base_record.subspan(source.biases.offset, source.biases.n_bytes), source.rows,
                    source.cols, from.bits, from.group_size, values);
    for (Target& target : targets) {
        const ExpertLayout& to = target.manifest.experts;
        const ProjectionLayout& part = projection(to, projection_index);
        std::byte* out = target.batch.bytes().data() + record * to.record_bytes;
        const uint64_t code_row = affine_code_bytes(1, part.cols, to.bits);
        const uint64_t scale_row = part.cols / static_cast<uint64_t>(to.group_size) * 2;
        for (uint64_t row = 0; row < part.rows; ++row) {
            quantize_row(std::span<const float>(values).subspan(row * part.cols, part.cols),
                         to.bits, to.group_size, out + part.codes.offset + row * code_row,
                         out + part.scales.offset + row * scale_row,
                         out + part.biases.offset + row * scale_row);
        }
    }
}

}  // namespace

std::vector<LowBitManifest> derive_lowbit_stores(const std::string& store_dir,
                                                 const StoreManifest& base,
                                                 std::span<const int> bits, unsigned n_threads,
                                                 const ProgressCallback& progress) {
    if (bits.empty()) return {};
    const ExpertLayout& from = base.experts;
    std::vector<Target> targets;
    uint64_t needed = 0;
    for (int width : bits) {
        if (width != 2 && width != 3)
            throw_invalid("low-bit expert stores are 3 or 2 bits, not " + std::to_string(width));
        Target target;
        target.manifest.bits = width;
        target.manifest.experts_file = lowbit_experts_name(width);
        target.manifest.base_experts_bytes = base.experts_bytes;
        target.manifest.experts =
            make_expert_layout(from.hidden, from.intermediate, width, from.group_size,
                               from.n_trunk_layers, from.n_mtp_layers, from.n_experts);
        target.manifest.experts_bytes = target.manifest.experts.file_bytes();
        target.final_path = store_dir + "/" + target.manifest.experts_file;
        needed += target.manifest.experts_bytes;
        targets.push_back(std::move(target));
    }
    require_disk_space(store_dir, needed + (16u << 20), "the low-bit expert stores");
    const std::string suffix = ".partial-" + std::to_string(::getpid());
    for (Target& target : targets) {
        target.out =
            std::make_unique<OutputFile>(target.final_path + suffix, target.manifest.experts_bytes,
                                         OutputMode::DirectWhenAligned);
    }
    try {
        WorkPool pool(n_threads);
        const uint64_t n_records = from.n_records();
        const uint64_t batch_records = std::min<uint64_t>(
            n_records, std::max<uint64_t>({1, kBatchBytes / from.record_bytes, pool.n_threads()}));
        // Padding between a record's parts stays zero: conversions write only the parts.
        std::vector<std::byte> base_batch(batch_records * from.record_bytes);
        for (Target& target : targets) {
            target.batch = AlignedBytes(batch_records * target.manifest.experts.record_bytes);
        }
        const std::string base_path = store_dir + "/" + std::string(kExpertsName);
        const UniqueFd fd = open_read_only(base_path);
        ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        PackProgress state;
        state.bytes_total = from.file_bytes();
        state.items_total = n_records;
        state.phase = "experts" + std::to_string(bits.front());
        for (uint64_t index = 1; index < bits.size(); ++index)
            state.phase += "+" + std::to_string(bits[index]);
        for (uint64_t first = 0; first < n_records; first += batch_records) {
            const uint64_t n_batch = std::min(batch_records, n_records - first);
            const uint64_t next = first + n_batch;
            if (next < n_records) {
                // Let the kernel read the next batch while this one is converted.
                ::posix_fadvise(fd.get(), static_cast<off_t>(next * from.record_bytes),
                                static_cast<off_t>(std::min(batch_records, n_records - next) *
                                                   from.record_bytes),
                                POSIX_FADV_WILLNEED);
            }
            const std::span<std::byte> input =
                std::span(base_batch).first(n_batch * from.record_bytes);
            pread_exact(fd.get(), input, first * from.record_bytes, base_path);
            // Tasks are (record, projection) pairs; each writes its own part of every target.
            pool.run(n_batch * 3, [&](size_t task) {
                const uint64_t record = task / 3;
                convert_projection(input.subspan(record * from.record_bytes, from.record_bytes),
                                   from, static_cast<int>(task % 3), targets, record);
            });
            for (Target& target : targets) {
                const uint64_t record_bytes = target.manifest.experts.record_bytes;
                target.out->write_at(first * record_bytes,
                                     target.batch.bytes().first(n_batch * record_bytes));
            }
            state.bytes_done += n_batch * from.record_bytes;
            state.items_done += n_batch;
            if (progress) progress(state);
        }
        for (Target& target : targets) {
            target.out->finish();
            if (::rename((target.final_path + suffix).c_str(), target.final_path.c_str()) != 0) {
                throw_errno("cannot publish " + target.final_path, errno);
            }
        }
        sync_parent_directory(store_dir + "/" + std::string(kExpertsName));
        for (Target& target : targets) {
            write_file_atomically(store_dir + "/" + lowbit_manifest_name(target.manifest.bits),
                                  lowbit_manifest_to_json(target.manifest).dump(1) + "\n");
        }
    } catch (...) {
        for (Target& target : targets) std::remove((target.final_path + suffix).c_str());
        throw;
    }
    std::vector<LowBitManifest> manifests;
    manifests.reserve(targets.size());
    for (Target& target : targets) manifests.push_back(target.manifest);
    return manifests;
}

}  // namespace cherenkov::store
