#include "engine/experts/expert_source_factory.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "engine/experts/direct_expert_reader.h"
#include "engine/experts/expert_cache.h"
#include "engine/experts/mapped_expert_table.h"
#include "store/index/prepare_command.h"
#include "store/manifest/store_manifest.h"

namespace cherenkov::engine {

BuiltExpertSource make_expert_source(ExpertSourceOptions options) {
    ExpertCacheOptions& cache = options.cache;
    const int miss_bits = cache.miss_bits == 0 ? cache.resident_bits : cache.miss_bits;
    const auto resident = cache.tables.find(cache.resident_bits);
    if (resident == cache.tables.end()) {
        throw_invalid("no Q" + std::to_string(cache.resident_bits) + " expert table given");
    }
    if (options.pool.mode == PoolMode::Mapped) {
        if (miss_bits != cache.resident_bits) {
            throw_invalid("--miss-experts " + std::to_string(miss_bits) +
                          " needs the expert cache: a mapped expert table has no misses to read "
                          "at lower precision");
        }
        char size[32];
        std::snprintf(size, sizeof size, "%.3f GB",
                      static_cast<double>(resident->second.layout.file_bytes()) / 1e9);
        BuiltExpertSource built;
        built.budget.description = "mapped: " + resident->second.path + " (" + size +
                                   ") used in place from the page cache";
        log_info("experts", built.budget.description);
        built.source =
            std::make_unique<MappedExpertTable>(resident->second.path, resident->second.layout);
        return built;
    }
    uint64_t slot_bytes = resident->second.layout.record_bytes;
    if (const auto miss = cache.tables.find(miss_bits); miss != cache.tables.end()) {
        slot_bytes = std::max(slot_bytes, miss->second.layout.record_bytes);
    }
    PoolRequirements requirements;
    requirements.slot_bytes = slot_bytes;
    requirements.n_table_records = resident->second.layout.n_records();
    requirements.step_records = static_cast<uint64_t>(std::max<int64_t>(options.max_rows, 1) *
                                                      std::max<int64_t>(options.top_k, 1));
    requirements.fixed_bytes = options.fixed_bytes;
    requirements.reserve_bytes = options.reserve_bytes;
    requirements.min_headroom_bytes = options.min_headroom_bytes;
    PoolSetting setting = options.pool;
    if (setting.mode == PoolMode::Staging) {
        // Four layer-steps of resident records: reads land here and are copied on to the device.
        setting = PoolSetting{
            .mode = PoolMode::Explicit,
            .bytes = 4 * requirements.step_records * resident->second.layout.record_bytes};
    }
    BuiltExpertSource built;
    built.budget = resolve_pool_budget(setting, requirements, options.memory);
    log_info("experts", built.budget.description);
    if (built.budget.n_slots == 0) {
        built.source =
            std::make_unique<DirectExpertReader>(resident->second.path, resident->second.layout);
        return built;
    }
    cache.n_slots = built.budget.n_slots;
    built.source = std::make_unique<ExpertCache>(std::move(cache));
    return built;
}

namespace {

// `base`: the store's manifest.json, parsed when Q4 is wanted (null: read here if it is).
ExpertTables find_tables(const std::string& store_dir, std::span<const int> bits,
                         const store::StoreManifest* base) {
    const std::filesystem::path dir(store_dir);
    ExpertTables tables;
    for (const int wanted : bits) {
        if (wanted == 4) {
            if (base != nullptr) {
                tables[4] = ExpertTable{(dir / "experts.bin").string(), base->experts};
                continue;
            }
            const std::string manifest = (dir / "manifest.json").string();
            const store::StoreManifest parsed =
                store::parse_store_manifest(read_text_file(manifest), manifest);
            tables[4] = ExpertTable{(dir / "experts.bin").string(), parsed.experts};
            continue;
        }
        const std::string manifest = (dir / store::lowbit_manifest_name(wanted)).string();
        if (!std::filesystem::exists(manifest)) {
            throw_not_found(store_dir + ": no Q" + std::to_string(wanted) + " expert table (" +
                            store::lowbit_manifest_name(wanted) +
                            "); build it with `cherenkov prepare " + store::shell_quote(store_dir) +
                            " --experts " + std::to_string(wanted) + "`");
        }
        const store::LowBitManifest parsed =
            store::parse_lowbit_manifest(read_text_file(manifest), manifest);
        tables[wanted] = ExpertTable{(dir / parsed.experts_file).string(), parsed.experts};
    }
    return tables;
}

}  // namespace

ExpertTables find_expert_tables(const std::string& store_dir, std::span<const int> bits) {
    return find_tables(store_dir, bits, nullptr);
}

ExpertTables find_expert_tables(const std::string& store_dir, std::span<const int> bits,
                                const store::StoreManifest& base) {
    return find_tables(store_dir, bits, &base);
}

}  // namespace cherenkov::engine
