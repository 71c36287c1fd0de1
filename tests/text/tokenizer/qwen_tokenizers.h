// The real Qwen2/Qwen3 tokenizer from tests/data, loaded once per test binary in both forms:
// vocab.json + merges.txt + tokenizer_config.json, and a full tokenizer.json assembled from the
// recorded skeleton (tokenizer.json.without-vocab-merges.json) plus vocab.json and merges.txt.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/file.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::text::testing {

inline std::string qwen_data_dir() {
    return std::string(CHERENKOV_SOURCE_DIR) + "/tests/data/tokenizer-qwen2-qwen3";
}

inline const Tokenizer& qwen_from_vocab_and_merges() {
    static const Tokenizer tokenizer = Tokenizer::load_directory(qwen_data_dir());
    return tokenizer;
}

// The skeleton's model.vocab / model.merges are placeholders; fill them in, merges as pairs.
inline std::string assemble_qwen_tokenizer_json() {
    const std::string dir = qwen_data_dir();
    nlohmann::json document =
        nlohmann::json::parse(read_text_file(dir + "/tokenizer.json.without-vocab-merges.json"));
    document["model"]["vocab"] = nlohmann::json::parse(read_text_file(dir + "/vocab.json"));
    nlohmann::json merges = nlohmann::json::array();
    const std::string merges_text = read_text_file(dir + "/merges.txt");
    size_t start = 0;
    while (start < merges_text.size()) {
        size_t end = merges_text.find('\n', start);
        if (end == std::string::npos) end = merges_text.size();
        const std::string line = merges_text.substr(start, end - start);
        start = end + 1;
        if (line.empty() || line.rfind("#version", 0) == 0) continue;
        const size_t space = line.find(' ');
        merges.push_back({line.substr(0, space), line.substr(space + 1)});
    }
    document["model"]["merges"] = merges;
    return document.dump();
}

inline const Tokenizer& qwen_from_tokenizer_json() {
    static const Tokenizer tokenizer = [] {
        const std::string config = read_text_file(qwen_data_dir() + "/tokenizer_config.json");
        return Tokenizer::from_json(assemble_qwen_tokenizer_json(), config, "qwen3/tokenizer.json");
    }();
    return tokenizer;
}

}  // namespace cherenkov::text::testing
