#include "store/packer/packer.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"
#include "base/half.h"
#include "store/packer/output_file.h"
#include "store/packer/pack_plan.h"
#include "store/packer/row_quantizer.h"
#include "store/packer/source_identity.h"
#include "store/packer/source_model.h"

namespace cherenkov::store {

namespace {

namespace fs = std::filesystem;
using model_data::Dtype;

constexpr uint64_t kBlockBytes = 32ull << 20;  // source bytes read per block
const char* const kCopiedFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                    "chat_template.jinja"};

class ProgressMeter {
public:
    ProgressMeter(const ProgressCallback& callback, uint64_t bytes_total, uint64_t items_total)
        : callback_(callback) {
        state_.bytes_total = bytes_total;
        state_.items_total = items_total;
    }
    void phase(std::string name) {
        state_.phase = std::move(name);
        report();
    }
    void advance(uint64_t bytes, uint64_t items) {
        state_.bytes_done += bytes;
        state_.items_done += items;
        report();
    }

private:
    void report() {
        if (callback_) callback_(state_);
    }
    const ProgressCallback& callback_;
    PackProgress state_;
};

uint64_t rows_per_block(uint64_t row_bytes) {
    return std::max<uint64_t>(1, kBlockBytes / std::max<uint64_t>(1, row_bytes));
}

// Streams float rows of `slice` into Q4 codes / scales / biases at the given output offsets.
void quantize_slice(const RowSlice& slice, Dtype dtype, uint64_t cols, int group_size,
                    OutputFile& out, const DenseTensor& entry, WorkPool& pool,
                    ProgressMeter& meter) {
    const uint64_t block_rows = rows_per_block(cols * 4);
    const uint64_t code_row = affine_code_bytes(1, cols, 4);
    const uint64_t scale_row = affine_scale_bytes(1, cols, group_size);
    std::vector<std::byte> raw;
    std::vector<float> values;
    std::vector<std::byte> codes, scales, biases;
    for (uint64_t row = 0; row < slice.n_rows; row += block_rows) {
        const uint64_t n = std::min(block_rows, slice.n_rows - row);
        raw.resize(n * slice.row_bytes);
        slice.read_rows(row, raw);
        values.resize(n * cols);
        decode_floats(raw, dtype, values, slice.info->name);
        codes.resize(n * code_row);
        scales.resize(n * scale_row);
        biases.resize(n * scale_row);
        quantize_rows(values, n, cols, 4, group_size, codes, scales, biases, pool);
        out.write_at(entry.data.offset + row * code_row, codes);
        out.write_at(entry.scales.offset + row * scale_row, scales);
        out.write_at(entry.biases.offset + row * scale_row, biases);
        meter.advance(raw.size(), 0);
    }
}

void copy_slice(const RowSlice& slice, OutputFile& out, uint64_t offset, ProgressMeter& meter) {
    const uint64_t block_rows = rows_per_block(slice.row_bytes);
    std::vector<std::byte> raw;
    for (uint64_t row = 0; row < slice.n_rows; row += block_rows) {
        const uint64_t n = std::min(block_rows, slice.n_rows - row);
        raw.resize(n * slice.row_bytes);
        slice.read_rows(row, raw);
        out.write_at(offset + row * slice.row_bytes, raw);
        meter.advance(raw.size(), 0);
    }
}

void float_slice(const RowSlice& slice, Dtype dtype, bool fold, OutputFile& out, uint64_t offset,
                 ProgressMeter& meter) {
    const uint64_t block_rows = rows_per_block(slice.row_bytes * 2);
    const uint64_t element_bytes = static_cast<uint64_t>(model_data::dtype_bits(dtype) / 8);
    std::vector<std::byte> raw;
    std::vector<float> values;
    for (uint64_t row = 0; row < slice.n_rows; row += block_rows) {
        const uint64_t n = std::min(block_rows, slice.n_rows - row);
        raw.resize(n * slice.row_bytes);
        slice.read_rows(row, raw);
        values.resize(raw.size() / element_bytes);
        decode_floats(raw, dtype, values, slice.info->name);
        if (fold) {
            for (float& value : values) value = 1.0f + value;
        }
        out.write_at(offset + row * (slice.row_bytes / element_bytes) * 4,
                     std::as_bytes(std::span<const float>(values)));
        meter.advance(raw.size(), 0);
    }
}

void write_dense(const PackPlan& plan, const std::string& path, WorkPool& pool,
                 ProgressMeter& meter) {
    meter.phase("dense");
    OutputFile out(path, plan.manifest.dense_bytes);
    for (const DenseJob& job : plan.dense) {
        switch (job.action) {
            case DenseAction::Quantize:
                quantize_slice(job.weight, job.source_dtype, job.entry.shape[1],
                               job.entry.group_size, out, job.entry, pool, meter);
                break;
            case DenseAction::CopyAffine:
                copy_slice(job.weight, out, job.entry.data.offset, meter);
                copy_slice(job.scales, out, job.entry.scales.offset, meter);
                copy_slice(job.biases, out, job.entry.biases.offset, meter);
                break;
            case DenseAction::ToF32:
            case DenseAction::FoldToF32:
                float_slice(job.weight, job.source_dtype, job.action == DenseAction::FoldToF32, out,
                            job.entry.data.offset, meter);
                break;
            case DenseAction::CopyI64:
                copy_slice(job.weight, out, job.entry.data.offset, meter);
                break;
        }
        meter.advance(0, 1);
    }
    out.finish();
}

// Interleaves planar codes / scales / biases into rows of [codes | scales | biases].
void interleave_rows(uint64_t n_rows, uint64_t code_row, uint64_t scale_row,
                     std::span<const std::byte> codes, std::span<const std::byte> scales,
                     std::span<const std::byte> biases, std::span<std::byte> out) {
    const uint64_t row_bytes = code_row + 2 * scale_row;
    for (uint64_t row = 0; row < n_rows; ++row) {
        std::byte* target = &out[row * row_bytes];
        std::memcpy(target, &codes[row * code_row], code_row);
        std::memcpy(target + code_row, &scales[row * scale_row], scale_row);
        std::memcpy(target + code_row + scale_row, &biases[row * scale_row], scale_row);
    }
}

void write_ngram(const PackPlan& plan, const std::string& path, WorkPool& pool,
                 ProgressMeter& meter) {
    meter.phase("ngram");
    OutputFile out(path, plan.manifest.ngram_bytes);
    std::vector<std::byte> raw, codes, scales, biases, rows;
    std::vector<float> values;
    for (const NgramJob& job : plan.ngram) {
        const uint64_t width = job.entry.width;
        const uint64_t code_row = affine_code_bytes(1, width, 4);
        const uint64_t scale_row = affine_scale_bytes(1, width, job.entry.group_size);
        uint64_t table_row = 0;
        for (const NgramPiece& piece : job.pieces) {
            const uint64_t block_rows = rows_per_block(width * 4);
            for (uint64_t row = 0; row < piece.weight.n_rows; row += block_rows) {
                const uint64_t n = std::min(block_rows, piece.weight.n_rows - row);
                codes.resize(n * code_row);
                scales.resize(n * scale_row);
                biases.resize(n * scale_row);
                if (piece.quantized) {
                    piece.weight.read_rows(row, codes);
                    piece.scales.read_rows(row, scales);
                    piece.biases.read_rows(row, biases);
                    meter.advance(codes.size() + 2 * scales.size(), 0);
                } else {
                    raw.resize(n * piece.weight.row_bytes);
                    piece.weight.read_rows(row, raw);
                    values.resize(n * width);
                    decode_floats(raw, piece.source_dtype, values, piece.weight.info->name);
                    quantize_rows(values, n, width, 4, job.entry.group_size, codes, scales, biases,
                                  pool);
                    meter.advance(raw.size(), 0);
                }
                rows.resize(n * job.entry.row_bytes);
                interleave_rows(n, code_row, scale_row, codes, scales, biases, rows);
                out.write_at(job.entry.range.offset + (table_row + row) * job.entry.row_bytes,
                             rows);
            }
            table_row += piece.weight.n_rows;
        }
        meter.advance(0, 1);
    }
    out.finish();
}

// Fills one projection of a record buffer.
void fill_projection(const ProjectionSource& source, const ProjectionLayout& layout, int group_size,
                     std::span<std::byte> record, std::vector<std::byte>& raw,
                     std::vector<float>& values, WorkPool& pool, uint64_t& bytes_read) {
    auto codes = record.subspan(layout.codes.offset, layout.codes.n_bytes);
    auto scales = record.subspan(layout.scales.offset, layout.scales.n_bytes);
    auto biases = record.subspan(layout.biases.offset, layout.biases.n_bytes);
    if (source.quantized) {
        source.weight.read_rows(0, codes);
        source.scales.read_rows(0, scales);
        source.biases.read_rows(0, biases);
        bytes_read += codes.size() + scales.size() + biases.size();
        return;
    }
    raw.resize(source.weight.n_bytes());
    source.weight.read_rows(0, raw);
    values.resize(layout.rows * layout.cols);
    decode_floats(raw, source.source_dtype, values, source.weight.info->name);
    quantize_rows(values, layout.rows, layout.cols, 4, group_size, codes, scales, biases, pool);
    bytes_read += raw.size();
}

void write_experts(const SourceModel& source, const PackPlan& plan, const std::string& path,
                   WorkPool& pool, ProgressMeter& meter) {
    meter.phase("experts");
    const ExpertLayout& layout = plan.manifest.experts;
    OutputFile out(path, layout.file_bytes());
    std::vector<std::byte> record(layout.record_bytes);
    std::vector<std::byte> raw;
    std::vector<float> values;
    for (int64_t layer = 0; layer < layout.n_layers(); ++layer) {
        for (int64_t expert = 0; expert < layout.n_experts; ++expert) {
            const ExpertSource expert_source = locate_expert(source, plan, layer, expert);
            std::fill(record.begin(), record.end(), std::byte{0});
            uint64_t bytes_read = 0;
            fill_projection(expert_source.gate, layout.gate, layout.group_size, record, raw, values,
                            pool, bytes_read);
            fill_projection(expert_source.up, layout.up, layout.group_size, record, raw, values,
                            pool, bytes_read);
            fill_projection(expert_source.down, layout.down, layout.group_size, record, raw, values,
                            pool, bytes_read);
            out.write_at(layout.record_offset(layer, expert), record);
            meter.advance(bytes_read, 1);
        }
    }
    out.finish();
}

// config.json with MTP drafting disabled where the source config declares MTP layers but the
// checkpoint has none; otherwise the source text unchanged.
std::string store_config_text(const SourceModel& source, const PackPlan& plan) {
    return packed_config_text(source.store->read_text("config.json"), !plan.disable_mtp_in_config,
                              source.path + "/config.json");
}

bool process_alive(long pid) {
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string packed_config_text(const std::string& source_text, bool has_mtp_weights,
                               const std::string& file) {
    if (has_mtp_weights) return source_text;
    nlohmann::json document = nlohmann::json::parse(source_text, nullptr, false);
    if (document.is_discarded() || !document.is_object()) {
        throw_corrupt(file + ": not a JSON object");
    }
    std::vector<nlohmann::json*> levels = {&document};
    if (document.contains("text_config") && document["text_config"].is_object())
        levels.push_back(&document["text_config"]);
    bool declares_mtp = false;
    for (const nlohmann::json* level : levels) {
        const auto it = level->find("mtp_num_hidden_layers");
        if (it != level->end() && it->is_number_integer() && it->get<int64_t>() > 0)
            declares_mtp = true;
    }
    if (!declares_mtp) return source_text;
    for (nlohmann::json* level : levels) {
        if (level->contains("mtp_num_hidden_layers")) (*level)["mtp_num_hidden_layers"] = 0;
    }
    return document.dump(2) + "\n";
}

uint64_t free_disk_bytes(const std::string& directory) {
    struct statvfs info {};
    if (::statvfs(directory.c_str(), &info) != 0)
        throw_errno("cannot query free space of " + directory, errno);
    return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
}

void require_disk_space(const std::string& directory, uint64_t needed_bytes,
                        const std::string& what) {
    const uint64_t free_bytes = free_disk_bytes(directory);
    if (free_bytes < needed_bytes) {
        throw Error(ErrorKind::ResourceExhausted,
                    directory + ": " + what + " needs " + std::to_string(needed_bytes / (1 << 20)) +
                        " MiB, only " + std::to_string(free_bytes / (1 << 20)) + " MiB free");
    }
}

std::string partial_path(const std::string& destination) {
    fs::path path = fs::path(destination).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();
    return (path.parent_path() /
            ("." + path.filename().string() + ".partial-" + std::to_string(::getpid())))
        .string();
}

void remove_stale_partials(const std::string& destination) {
    fs::path path = fs::path(destination).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();
    fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    const std::string prefix = "." + path.filename().string() + ".partial-";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string pid_text = name.substr(prefix.size());
        if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos)
            continue;
        if (process_alive(std::stol(pid_text))) continue;
        fs::remove_all(entry.path(), ec);
    }
}

StoreManifest pack_store(const PackOptions& options) {
    std::error_code ec;
    if (fs::exists(options.output_dir, ec)) {
        throw_invalid(options.output_dir + ": already exists; packing writes a new directory");
    }
    SourceModel source = open_source_model(options.source_dir);
    PackPlan plan = plan_pack(source);
    plan.manifest.source = read_source_identity(source.path, plan.manifest.source.kind,
                                                plan.manifest.source.norm_convention);

    fs::path destination = fs::path(options.output_dir).lexically_normal();
    if (destination.filename().empty()) destination = destination.parent_path();
    const fs::path parent =
        destination.parent_path().empty() ? fs::path(".") : destination.parent_path();
    if (!fs::is_directory(parent, ec))
        throw_not_found(parent.string() + ": parent directory of the store does not exist");
    remove_stale_partials(destination.string());
    require_disk_space(parent.string(), plan.output_bytes() + (16u << 20), "the packed store");

    const std::string temp = partial_path(destination.string());
    if (!fs::create_directory(temp, ec) || ec) {
        throw_io(temp + ": cannot create the temporary store directory: " + ec.message());
    }
    try {
        WorkPool pool(options.n_threads);
        const uint64_t items =
            plan.dense.size() + plan.ngram.size() + plan.manifest.experts.n_records();
        ProgressMeter meter(options.progress, plan.source_bytes, items);
        write_dense(plan, temp + "/" + std::string(kDenseName), pool, meter);
        write_ngram(plan, temp + "/" + std::string(kNgramName), pool, meter);
        write_experts(source, plan, temp + "/" + std::string(kExpertsName), pool, meter);
        write_file_atomically(temp + "/config.json", store_config_text(source, plan));
        for (const char* name : kCopiedFiles) {
            if (source.store->exists(name))
                write_file_atomically(temp + "/" + name, source.store->read_text(name));
        }
        write_file_atomically(temp + "/" + std::string(kManifestName),
                              manifest_to_json(plan.manifest).dump(1) + "\n");
        sync_parent_directory(temp + "/" + std::string(kManifestName));
        if (::rename(temp.c_str(), destination.c_str()) != 0) {
            throw_errno("cannot publish " + destination.string(), errno);
        }
        sync_parent_directory(destination.string());
    } catch (const Error& error) {
        fs::remove_all(temp, ec);
        throw error.with_context("while packing " + options.source_dir);
    } catch (...) {
        fs::remove_all(temp, ec);
        throw;
    }
    return plan.manifest;
}

}  // namespace cherenkov::store
