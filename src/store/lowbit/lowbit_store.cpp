#include "store/lowbit/lowbit_store.h"

#include <unistd.h>

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

struct Target {
    LowBitManifest manifest;
    std::string final_path;
    std::unique_ptr<OutputFile> out;
    std::vector<std::byte> record;
};

void requantize_projection(std::span<const std::byte> base_record, const ProjectionLayout& from,
                           int from_bits, std::span<std::byte> record, const ProjectionLayout& to,
                           int to_bits, int group_size, std::vector<float>& values,
                           WorkPool& pool) {
    values.resize(from.rows * from.cols);
    dequantize_rows(base_record.subspan(from.codes.offset, from.codes.n_bytes),
                    base_record.subspan(from.scales.offset, from.scales.n_bytes),
                    base_record.subspan(from.biases.offset, from.biases.n_bytes), from.rows,
                    from.cols, from_bits, group_size, values);
    quantize_rows(values, to.rows, to.cols, to_bits, group_size,
                  record.subspan(to.codes.offset, to.codes.n_bytes),
                  record.subspan(to.scales.offset, to.scales.n_bytes),
                  record.subspan(to.biases.offset, to.biases.n_bytes), pool);
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
        target.record.resize(target.manifest.experts.record_bytes);
        needed += target.manifest.experts_bytes;
        targets.push_back(std::move(target));
    }
    require_disk_space(store_dir, needed + (16u << 20), "the low-bit expert stores");
    const std::string suffix = ".partial-" + std::to_string(::getpid());
    for (Target& target : targets) {
        target.out =
            std::make_unique<OutputFile>(target.final_path + suffix, target.manifest.experts_bytes);
    }
    try {
        WorkPool pool(n_threads);
        const std::string base_path = store_dir + "/" + std::string(kExpertsName);
        const UniqueFd fd = open_read_only(base_path);
        std::vector<std::byte> base_record(from.record_bytes);
        std::vector<float> values;
        PackProgress state;
        state.bytes_total = from.file_bytes();
        state.items_total = from.n_records();
        state.phase = "experts" + std::to_string(bits.front());
        for (uint64_t index = 1; index < bits.size(); ++index)
            state.phase += "+" + std::to_string(bits[index]);
        for (uint64_t record = 0; record < from.n_records(); ++record) {
            pread_exact(fd.get(), base_record, record * from.record_bytes, base_path);
            for (Target& target : targets) {
                const ExpertLayout& to = target.manifest.experts;
                std::fill(target.record.begin(), target.record.end(), std::byte{0});
                requantize_projection(base_record, from.gate, from.bits, target.record, to.gate,
                                      to.bits, to.group_size, values, pool);
                requantize_projection(base_record, from.up, from.bits, target.record, to.up,
                                      to.bits, to.group_size, values, pool);
                requantize_projection(base_record, from.down, from.bits, target.record, to.down,
                                      to.bits, to.group_size, values, pool);
                target.out->write_at(record * to.record_bytes, target.record);
            }
            state.bytes_done += from.record_bytes;
            state.items_done += 1;
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
