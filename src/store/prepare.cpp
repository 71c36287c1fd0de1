#include "store/prepare.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/log.h"
#include "store/lowbit/lowbit_store.h"
#include "store/packer/source_identity.h"
#include "store/packer/source_model.h"
#include "store/store_check.h"
#include "store/store_update.h"

namespace cherenkov::store {

std::vector<int> parse_expert_bits(const std::vector<std::string>& items) {
    std::vector<int> bits;
    for (const std::string& item : items) {
        std::string token;
        auto flush = [&] {
            if (token.empty()) return;
            if (token != "4" && token != "3" && token != "2") {
                throw_invalid("--experts: \"" + token + "\" is not one of 4, 3, 2");
            }
            const int width = token[0] - '0';
            if (std::find(bits.begin(), bits.end(), width) == bits.end()) bits.push_back(width);
            token.clear();
        };
        for (char c : item) {
            if (c == ',' || c == ' ' || c == '\t') {
                flush();
            } else {
                token.push_back(c);
            }
        }
        flush();
    }
    if (bits.empty()) bits.push_back(4);
    return bits;
}

// A store is reused only for the checkpoint it was packed from (same kind and content hashes;
// a moved or touched copy is the same source). Never overwrites a store packed from another.
void require_same_source(const std::string& store_dir, const SourceIdentity& recorded,
                         const std::string& source_dir, const std::string& advice) {
    const SourceModel source = open_source_model(source_dir);
    const SourceIdentity current =
        read_source_identity(source.path, source.kind(), recorded.norm_convention);
    const std::optional<std::string> difference = source_difference(recorded, current);
    if (difference) {
        throw_invalid("existing store " + store_dir + " was packed from " + recorded.path + " (" +
                      *difference + "); " + advice);
    }
    const bool hashed =
        std::any_of(recorded.files.begin(), recorded.files.end(),
                    [](const SourceFile& file) { return file.sha256 || file.header_sha256; });
    if (!hashed) {
        log_warn("store", "existing store " + store_dir + " records no source hashes; matched " +
                              source_dir + " by file names and sizes only");
    }
}

PrepareResult prepare_store(const PrepareOptions& options) {
    PrepareResult result;
    std::error_code ec;
    if (std::filesystem::exists(options.output_dir, ec)) {
        if (!looks_like_store(options.output_dir)) {
            throw_invalid(options.output_dir +
                          ": exists and is not a store; choose a new directory");
        }
        StoreChanges changes;
        try {
            changes =
                plan_store_changes(options.output_dir, options.expert_bits, options.source_dir);
        } catch (const Error& error) {
            throw error.with_context("existing store " + options.output_dir +
                                     " is invalid (remove it to pack again)");
        }
        // Without a source (an indexed model whose download is gone) the catalog already ties
        // the store to its model.
        if (!options.source_dir.empty()) {
            require_same_source(options.output_dir, changes.manifest.source, options.source_dir);
        }
        apply_store_changes(options.output_dir, changes,
                            {options.source_dir, options.n_threads, options.progress});
        result.manifest = changes.manifest;
        result.derived = changes.missing_bits;
        result.reused = changes.valid_bits;
        result.repaired = changes.missing_metadata;
        return result;
    }
    PackOptions pack;
    pack.source_dir = options.source_dir;
    pack.output_dir = options.output_dir;
    pack.n_threads = options.n_threads;
    pack.progress = options.progress;
    result.manifest = pack_store(pack);
    result.base_packed = true;
    const StoreChanges changes = plan_store_changes(options.output_dir, options.expert_bits, "");
    apply_store_changes(options.output_dir, changes, {"", options.n_threads, options.progress});
    result.derived = changes.missing_bits;
    return result;
}

}  // namespace cherenkov::store
