// Fuzzes the qwen4_exp config.json parser: any text must parse or fail with cherenkov::Error,
// and an accepted config must serialize and (for small PLE setups) build its n-gram hashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "model_data/qwen4_exp/config.h"
#include "model_data/qwen4_exp/ngram_hashing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::model_data::qwen4_exp;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const Config config = parse_config(text, "config.json");
        const std::string dumped = config_to_json(config).dump();
        if (dumped.empty()) __builtin_trap();
        // Keep the prime search cheap: only configs with few n-gram heads in all.
        if (config.has_ple() && config.n_ngram_heads * config.n_ple_layers() <= 256) {
            const int64_t tokens[] = {0, config.first_eos(), config.vocab_size - 1};
            for (const NgramHash& hash : build_all_ngram_hashes(config)) {
                const NgramIds ids = ngram_ids(hash, initial_ngram_context(hash), tokens);
                if (ids.ids.size() != 3 * static_cast<size_t>(hash.n_heads())) __builtin_trap();
            }
        }
    } catch (const cherenkov::Error&) {
        // Rejected input: the expected outcome for most mutations.
    }
    return 0;
}
