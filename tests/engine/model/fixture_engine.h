// Test support: the reference fixtures (tests/fixtures) packed into stores once per process,
// an engine over each, and readers for the reference tensors.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/experts/direct_expert_reader.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/model/model_weights.h"
#include "model_data/safetensors/safetensors_file.h"
#include "model_data/sources/byte_source.h"
#include "store/prepare.h"
#include "support/temp_dir.h"

namespace cherenkov::testing {

inline std::string fixture_path(const std::string& relative) {
    return std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/" + relative;
}

// "tiny_a/hf_flat_fused" → a store directory packed from it (once per process).
inline const std::string& packed_fixture(const std::string& checkpoint) {
    static TempDir root;
    static std::map<std::string, std::string> stores;
    auto it = stores.find(checkpoint);
    if (it != stores.end()) return it->second;
    std::string name = checkpoint;
    for (char& ch : name) {
        if (ch == '/') ch = '_';
    }
    store::PrepareOptions options;
    options.source_dir = fixture_path(checkpoint);
    options.output_dir = root.file(name);
    options.expert_bits = {4, 3, 2};
    options.n_threads = 1;
    store::prepare_store(options);
    return stores.emplace(checkpoint, options.output_dir).first->second;
}

struct FixtureEngine {
    explicit FixtureEngine(
        const std::string& checkpoint, int threads = 1,
        engine::ActivationPrecision activations = engine::ActivationPrecision::F32)
        : weights(engine::load_model_weights(packed_fixture(checkpoint))),
          experts(weights->store_dir + "/experts.bin", weights->manifest.experts),
          pool(threads),
          model(*weights, experts, pool, activations) {}

    std::unique_ptr<engine::ModelWeights> weights;
    engine::DirectExpertReader experts;
    engine::ThreadPool pool;
    engine::Model model;
};

class ReferenceFile {
public:
    explicit ReferenceFile(const std::string& relative)
        : file_(model_data::SafetensorsFile::open(
              model_data::open_file_source(fixture_path(relative)))) {}

    bool has(const std::string& name) const {
        for (const auto& t : file_.tensors()) {
            if (t.name == name) return true;
        }
        return false;
    }
    std::vector<uint64_t> shape(const std::string& name) const { return file_.tensor(name).shape; }

    template <typename T>
    std::vector<T> read(const std::string& name) const {
        const auto& info = file_.tensor(name);
        std::vector<std::byte> bytes = file_.read_tensor(info);
        std::vector<T> out(bytes.size() / sizeof(T));
        std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
        return out;
    }
    std::vector<int32_t> tokens(const std::string& name) const {
        std::vector<int64_t> ids = read<int64_t>(name);
        return {ids.begin(), ids.end()};
    }

private:
    model_data::SafetensorsFile file_;
};

// The first row whose router or QSA selection in any layer is a tie or near-tie (margin ≤ 1e-4,
// relative for the router): the reference breaks such ties in an implementation-defined way, so
// rows from there on are skipped, never failed (docs/qwen4_exp.md §7). n_rows when none.
inline int64_t first_tie_row(const engine::ForwardTrace& trace, int64_t n_rows) {
    int64_t first = n_rows;
    for (const auto& [name, values] : trace.tensors) {
        const bool margin = name.ends_with("qsa.margin") || name.ends_with("moe.margin");
        if (!margin) continue;
        for (size_t t = 0; t < values.size(); ++t) {
            if (values[t] <= 1e-4F) first = std::min(first, static_cast<int64_t>(t % n_rows));
        }
    }
    return first;
}

// Every token a Generator emits for `prompt` (stats optional).
inline std::vector<int32_t> generate_tokens(engine::ModelBackend& model,
                                            const std::vector<int32_t>& prompt,
                                            const engine::GenerationOptions& options,
                                            engine::GenerationStats* stats = nullptr) {
    engine::Generator generator(model, options);
    std::vector<int32_t> out;
    engine::GenerationStats s = generator.generate(prompt, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    if (stats != nullptr) *stats = s;
    return out;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float worst = a.size() == b.size() ? 0.0F : 1e30F;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
}

}  // namespace cherenkov::testing
