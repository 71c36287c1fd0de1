// tokenizer_config.json (transformers): the eos and pad tokens, added_tokens_decoder with each
// token's flags, and the fields the vocab.json + merges.txt path needs (tokenizer_class,
// add_prefix_space, and Qwen3.5's pretokenize_regex). Other keys are not tokenizer behaviour.
#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/tokenizer/json_field.h"
#include "text/tokenizer/tokenizer_spec.h"

namespace cherenkov::text {
namespace {

// A special-token entry is a string, or an AddedToken object {"content": ...}, or null.
std::optional<std::string> parse_token_name(const JsonField& root, std::string_view key) {
    const std::optional<JsonField> field = root.find(key);
    if (!field) return std::nullopt;
    if (field->value().is_object()) return field->at("content").as_string();
    return field->as_string();
}

int64_t parse_id_key(const JsonField& field, const std::string& key) {
    int64_t id = 0;
    const char* end = key.data() + key.size();
    const auto [pointer, error] = std::from_chars(key.data(), end, id);
    if (error != std::errc() || pointer != end || key.empty()) {
        field.fail("key '" + key + "' is not a token id");
    }
    return id;
}

}  // namespace

TokenizerConfigSpec parse_tokenizer_config(std::string_view text) {
    const nlohmann::json document = JsonField::parse(text);
    const JsonField root(document, "");
    root.expect_object();
    TokenizerConfigSpec config;
    config.eos_token = parse_token_name(root, "eos_token");
    config.pad_token = parse_token_name(root, "pad_token");
    config.tokenizer_class = root.optional_string("tokenizer_class");
    config.pretokenize_regex = root.optional_string("pretokenize_regex");
    config.add_prefix_space = root.bool_or("add_prefix_space", false);
    if (const std::optional<JsonField> decoder = root.find("added_tokens_decoder")) {
        decoder->expect_object();
        for (const auto& [key, value] : decoder->value().items()) {
            const JsonField entry(value, decoder->path() + "." + key);
            AddedTokenSpec token;
            token.declared_id = parse_id_key(*decoder, key);
            token.content = entry.at("content").as_string();
            token.single_word = entry.bool_or("single_word", false);
            token.lstrip = entry.bool_or("lstrip", false);
            token.rstrip = entry.bool_or("rstrip", false);
            token.special = entry.bool_or("special", false);
            // transformers' AddedToken defaults normalized to `not special`.
            token.normalized = entry.bool_or("normalized", !token.special);
            token.field = entry.path();
            config.added_tokens.push_back(std::move(token));
        }
        std::sort(config.added_tokens.begin(), config.added_tokens.end(),
                  [](const AddedTokenSpec& left, const AddedTokenSpec& right) {
                      return *left.declared_id < *right.declared_id;
                  });
    }
    return config;
}

}  // namespace cherenkov::text
