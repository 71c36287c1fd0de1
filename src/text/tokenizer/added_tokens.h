// Added tokens (tokenizer.json "added_tokens", tokenizer_config.json "added_tokens_decoder"):
// id assignment and matching as Hugging Face's AddedVocabulary does. Tokens with
// normalized=false are found in the raw text first; the rest of the text is normalized and then
// searched for tokens with normalized=true (compared in normalized form). Matching is
// leftmost-longest; single_word, lstrip and rstrip use Unicode \w and \s (Rust regex semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/regex.h"

namespace cherenkov::text {

struct AddedTokenSpec {
    std::string content;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = true;
    bool special = false;
    std::optional<int64_t> declared_id;  // the id the file states, checked against the assigned one
    std::string field;                   // e.g. "added_tokens[3]", for errors

    bool same_token(const AddedTokenSpec& other) const {
        return content == other.content && single_word == other.single_word &&
               lstrip == other.lstrip && rstrip == other.rstrip && normalized == other.normalized &&
               special == other.special;
    }
};

// A part of the searched text: an added token (id >= 0) or plain text (id == -1).
struct AddedSegment {
    size_t begin = 0;
    size_t end = 0;
    int32_t id = -1;
};

class AddedVocabulary {
public:
    enum class Pass { Raw, Normalized };

    AddedVocabulary();
    ~AddedVocabulary();
    AddedVocabulary(AddedVocabulary&&) noexcept;
    AddedVocabulary& operator=(AddedVocabulary&&) noexcept;

    // tokenizers' AddedVocabulary::add_tokens: a token keeps the id of equal content already
    // known (added or in the model), else takes the next free id. Throws Corrupt naming the
    // token's field when that differs from its declared id.
    void add_tokens(const std::vector<AddedTokenSpec>& tokens, const BpeModel& model,
                    const Normalizer& normalizer);
    // Builds the matchers; call once after the last add_tokens.
    void finalize();

    std::optional<int32_t> token_id(std::string_view content) const;
    const AddedTokenSpec* token(int32_t id) const;
    // The text decoding uses for `id`: the normalized content for normalized tokens.
    std::optional<std::string_view> decode_text(int32_t id) const;
    bool is_special_content(std::string_view text) const;
    bool empty() const { return tokens_.empty(); }
    int32_t id_limit() const;
    bool has_pass(Pass pass) const;

    // Splits `text` (valid UTF-8) into added tokens and the text between them, appending to
    // `out` (tokenizers' find_matches). Without `parse_special`, special tokens are not matched
    // (tokenizers' encode_special_tokens).
    void split(std::string_view text, Pass pass, bool parse_special,
               std::vector<AddedSegment>& out) const;

private:
    struct Trie;
    void find_matches(std::string_view text, const Trie& trie, bool parse_special,
                      std::vector<AddedSegment>& out) const;

    std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> ids_;
    std::unordered_map<int32_t, AddedTokenSpec> tokens_;
    std::unordered_map<int32_t, std::string> normalized_forms_;
    std::set<std::string, std::less<>> special_contents_;
    std::unique_ptr<Trie> raw_trie_;
    std::unique_ptr<Trie> normalized_trie_;
    std::optional<Regex> word_char_;
    std::optional<Regex> space_char_;
};

}  // namespace cherenkov::text
