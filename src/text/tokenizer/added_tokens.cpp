// Added-token ids and matching. The matcher is a byte trie searched leftmost-longest, with a
// 256-entry root so positions that cannot start a token cost one table lookup.
#include "text/tokenizer/added_tokens.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

// Rust regex's Unicode \w and \s, which tokenizers uses for single_word, lstrip and rstrip.
constexpr std::string_view kWordCharPattern =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";
constexpr std::string_view kSpaceCharPattern = R"(\p{White_Space})";

std::string quoted(std::string_view text) {
    // Appends rather than "'" + std::string(text): GCC 12 at -O3 warns (-Wrestrict) on that.
    std::string out(1, '\'');
    out.append(text);
    out.push_back('\'');
    return out;
}

size_t previous_char_start(std::string_view text, size_t offset) {
    size_t back = offset - 1;
    while (back > 0 && (static_cast<uint8_t>(text[back]) & 0xC0) == 0x80) --back;
    return back;
}

}  // namespace

struct AddedVocabulary::Trie {
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> children;
        int32_t token = -1;
    };

    Trie() { root.fill(-1); }

    int32_t child(int32_t node, uint8_t byte) const {
        for (const auto& [label, index] : nodes[static_cast<size_t>(node)].children) {
            if (label == byte) return index;
        }
        return -1;
    }

    // Returns the id already stored for `pattern`, or -1 after storing `id`.
    int32_t insert(std::string_view pattern, int32_t id) {
        auto first = static_cast<uint8_t>(pattern[0]);
        if (root[first] < 0) {
            root[first] = static_cast<int32_t>(nodes.size());
            nodes.emplace_back();
        }
        int32_t node = root[first];
        for (size_t index = 1; index < pattern.size(); ++index) {
            const auto byte = static_cast<uint8_t>(pattern[index]);
            int32_t next = child(node, byte);
            if (next < 0) {
                next = static_cast<int32_t>(nodes.size());
                nodes[static_cast<size_t>(node)].children.emplace_back(byte, next);
                nodes.emplace_back();
            }
            node = next;
        }
        Node& leaf = nodes[static_cast<size_t>(node)];
        if (leaf.token >= 0) return leaf.token;
        leaf.token = id;
        return -1;
    }

    // Longest pattern starting at `begin`: sets `end` and returns its id, or -1.
    int32_t longest_at(std::string_view text, size_t begin, size_t& end) const {
        int32_t node = root[static_cast<uint8_t>(text[begin])];
        int32_t found = -1;
        size_t offset = begin + 1;
        while (node >= 0) {
            const Node& current = nodes[static_cast<size_t>(node)];
            if (current.token >= 0) {
                found = current.token;
                end = offset;
            }
            if (offset >= text.size()) break;
            node = child(node, static_cast<uint8_t>(text[offset]));
            ++offset;
        }
        return found;
    }

    std::array<int32_t, 256> root;
    std::vector<Node> nodes;
};

AddedVocabulary::AddedVocabulary() = default;
AddedVocabulary::~AddedVocabulary() = default;
AddedVocabulary::AddedVocabulary(AddedVocabulary&&) noexcept = default;
AddedVocabulary& AddedVocabulary::operator=(AddedVocabulary&&) noexcept = default;

void AddedVocabulary::add_tokens(const std::vector<AddedTokenSpec>& tokens, const BpeModel& model,
                                 const Normalizer& normalizer) {
    const auto n_model = static_cast<int64_t>(model.n_entries());
    int64_t next_id = n_model;
    if (!tokens_.empty()) {
        int64_t max_id = 0;
        for (const auto& [id, token] : tokens_) max_id = std::max<int64_t>(max_id, id);
        next_id = (max_id >= n_model || n_model == 0) ? max_id + 1 : n_model;
    }
    std::string buffer;
    for (const AddedTokenSpec& token : tokens) {
        if (token.content.empty()) continue;
        const auto known = ids_.find(token.content);
        if (known != ids_.end() && tokens_.at(known->second).same_token(token)) continue;
        int64_t id = 0;
        if (known != ids_.end()) {
            id = known->second;
        } else if (const std::optional<int32_t> model_id = model.token_id(token.content)) {
            id = *model_id;
        } else {
            id = next_id++;
        }
        if (token.declared_id && *token.declared_id != id) {
            throw_corrupt(token.field + ".id: " + quoted(token.content) + " is declared as id " +
                          std::to_string(*token.declared_id) + " but resolves to id " +
                          std::to_string(id) +
                          " (ids come from the model vocabulary, then count up from its size)");
        }
        if (id >= kMaxTokenId) {
            throw_corrupt(token.field + ".id: id " + std::to_string(id) + " is out of range");
        }
        const std::optional<std::string_view> model_text =
            model.token_text(static_cast<int32_t>(id));
        if (model_text && *model_text != token.content) {
            throw_corrupt(token.field + ".id: id " + std::to_string(id) + " of " +
                          quoted(token.content) + " already belongs to vocabulary token " +
                          quoted(*model_text));
        }
        const auto id32 = static_cast<int32_t>(id);
        if (token.normalized && !normalizer.empty()) {
            const std::string_view normalized = normalizer.normalize(token.content, buffer);
            if (normalized != token.content) normalized_forms_[id32] = std::string(normalized);
        }
        ids_[token.content] = id32;
        if (token.special) special_contents_.insert(token.content);
        tokens_[id32] = token;
    }
}

void AddedVocabulary::finalize() {
    raw_trie_.reset();
    normalized_trie_.reset();
    std::vector<int32_t> ids;
    ids.reserve(tokens_.size());
    for (const auto& [id, token] : tokens_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (const int32_t id : ids) {
        const AddedTokenSpec& token = tokens_.at(id);
        std::unique_ptr<Trie>& trie = token.normalized ? normalized_trie_ : raw_trie_;
        if (!trie) trie = std::make_unique<Trie>();
        const auto form = normalized_forms_.find(id);
        const std::string_view pattern =
            token.normalized && form != normalized_forms_.end() ? form->second : token.content;
        const int32_t other = trie->insert(pattern, id);
        if (other >= 0) {
            throw_corrupt(token.field + ": " + quoted(token.content) + " (id " +
                          std::to_string(id) + ") matches the same text as id " +
                          std::to_string(other));
        }
        if (token.single_word && !word_char_) {
            word_char_.emplace(kWordCharPattern, Regex::Syntax::Pattern, "single_word");
        }
        if ((token.lstrip || token.rstrip) && !space_char_) {
            space_char_.emplace(kSpaceCharPattern, Regex::Syntax::Pattern, "lstrip");
        }
    }
}

std::optional<int32_t> AddedVocabulary::token_id(std::string_view content) const {
    const auto found = ids_.find(content);
    if (found == ids_.end()) return std::nullopt;
    return found->second;
}

const AddedTokenSpec* AddedVocabulary::token(int32_t id) const {
    const auto found = tokens_.find(id);
    return found == tokens_.end() ? nullptr : &found->second;
}

std::optional<std::string_view> AddedVocabulary::decode_text(int32_t id) const {
    const auto found = tokens_.find(id);
    if (found == tokens_.end()) return std::nullopt;
    const auto form = normalized_forms_.find(id);
    if (form != normalized_forms_.end()) return std::string_view(form->second);
    return std::string_view(found->second.content);
}

bool AddedVocabulary::is_special_content(std::string_view text) const {
    return special_contents_.find(text) != special_contents_.end();
}

int32_t AddedVocabulary::id_limit() const {
    int32_t limit = 0;
    for (const auto& [id, token] : tokens_) limit = std::max(limit, id + 1);
    return limit;
}

bool AddedVocabulary::has_pass(Pass pass) const {
    return pass == Pass::Raw ? raw_trie_ != nullptr : normalized_trie_ != nullptr;
}

void AddedVocabulary::split(std::string_view text, Pass pass, bool parse_special,
                            std::vector<AddedSegment>& out) const {
    const Trie* trie = pass == Pass::Raw ? raw_trie_.get() : normalized_trie_.get();
    if (trie == nullptr || text.empty()) {
        out.push_back(AddedSegment{0, text.size(), -1});
        return;
    }
    find_matches(text, *trie, parse_special, out);
}

void AddedVocabulary::find_matches(std::string_view text, const Trie& trie, bool parse_special,
                                   std::vector<AddedSegment>& out) const {
    std::optional<RegexScratch> scratch;
    auto char_is = [&](const std::optional<Regex>& regex, size_t offset) {
        if (!scratch) scratch.emplace();
        size_t end = 0;
        return regex->matches_at(text, offset, *scratch, end);
    };
    size_t start_offset = 0;
    size_t position = 0;
    while (position < text.size()) {
        if (trie.root[static_cast<uint8_t>(text[position])] < 0) {
            ++position;
            continue;
        }
        size_t stop = 0;
        const int32_t id = trie.longest_at(text, position, stop);
        if (id < 0) {
            ++position;
            continue;
        }
        size_t start = position;
        position = stop;  // the automaton resumes after the match, whatever the flags decide
        const AddedTokenSpec& token = tokens_.at(id);
        if (!parse_special && special_contents_.count(token.content) != 0) continue;
        if (token.single_word) {
            const bool space_before =
                start == 0 || !char_is(word_char_, previous_char_start(text, start));
            const bool space_after = stop == text.size() || !char_is(word_char_, stop);
            if (!space_before || !space_after) continue;
        }
        if (token.lstrip) {
            size_t new_start = start;
            while (new_start > 0 && char_is(space_char_, previous_char_start(text, new_start))) {
                new_start = previous_char_start(text, new_start);
            }
            start = std::max(new_start, start_offset);
        }
        if (token.rstrip) {
            while (stop < text.size() && char_is(space_char_, stop)) {
                stop += utf8_sequence_length(static_cast<uint8_t>(text[stop]));
            }
        }
        if (start_offset < start) out.push_back(AddedSegment{start_offset, start, -1});
        out.push_back(AddedSegment{start, stop, id});
        start_offset = stop;
    }
    if (start_offset != text.size()) out.push_back(AddedSegment{start_offset, text.size(), -1});
}

}  // namespace cherenkov::text
