// The pre-tokenizer.json format: vocab.json (token -> id) and merges.txt (one "a b" merge per
// line after an optional "#version" header), assembled the way transformers' Qwen2Tokenizer and
// its Qwen2Converter do.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/tokenizer/json_field.h"
#include "text/tokenizer/tokenizer_spec.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

std::vector<std::pair<std::string, int64_t>> parse_vocab(std::string_view text) {
    try {
        const nlohmann::json document = JsonField::parse(text);
        const JsonField root(document, "");
        root.expect_object();
        std::vector<std::pair<std::string, int64_t>> vocab;
        vocab.reserve(document.size());
        for (const auto& [token, id] : document.items()) {
            vocab.emplace_back(token, JsonField(id, "['" + token + "']").as_int());
        }
        return vocab;
    } catch (const Error& e) {
        throw e.with_context("vocab.json");
    }
}

std::vector<std::pair<std::string, std::string>> parse_merges(std::string_view text) {
    std::vector<std::pair<std::string, std::string>> merges;
    size_t line_start = 0;
    size_t line_number = 0;
    while (line_start < text.size()) {
        size_t line_end = text.find('\n', line_start);
        if (line_end == std::string_view::npos) line_end = text.size();
        std::string_view line = text.substr(line_start, line_end - line_start);
        line_start = line_end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
        const std::string where = "merges.txt: line " + std::to_string(line_number);
        if (find_invalid_utf8(line) != kValidUtf8) throw_corrupt(where + ": not valid UTF-8");
        const size_t space = line.find(' ');
        if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
            line.find(' ', space + 1) != std::string_view::npos) {
            throw_corrupt(where + ": expected two tokens separated by one space");
        }
        merges.emplace_back(std::string(line.substr(0, space)),
                            std::string(line.substr(space + 1)));
    }
    return merges;
}

}  // namespace

TokenizerSpec spec_from_vocab_and_merges(std::string_view vocab_json, std::string_view merges_txt,
                                         const TokenizerConfigSpec& config) {
    if (config.tokenizer_class && *config.tokenizer_class != "Qwen2Tokenizer" &&
        *config.tokenizer_class != "Qwen2TokenizerFast") {
        throw_unsupported("tokenizer_config.json: tokenizer_class: '" + *config.tokenizer_class +
                          "' has no tokenizer.json here; only Qwen2Tokenizer can be built from "
                          "vocab.json + merges.txt");
    }
    TokenizerSpec spec;
    spec.model.vocab = parse_vocab(vocab_json);
    spec.model.merges = parse_merges(merges_txt);
    spec.model.vocab_field = "vocab.json";
    spec.model.merges_field = "merges.txt: merge";
    spec.normalizer = {UnicodeForm::Nfc};
    SplitStep split;
    split.pattern = config.pretokenize_regex.value_or(kQwen2Pattern);
    split.behavior = SplitBehavior::Isolated;
    split.field = config.pretokenize_regex ? "tokenizer_config.json: pretokenize_regex"
                                           : "Qwen2 pre-tokenizer regex";
    spec.pre_tokenizer.emplace_back(std::move(split));
    spec.pre_tokenizer.emplace_back(ByteLevelStep{config.add_prefix_space, false});
    spec.decoder = DecoderKind::ByteLevel;
    return spec;
}

}  // namespace cherenkov::text
