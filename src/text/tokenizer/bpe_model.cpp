// BPE: vocabulary validation, initial symbols per character (or per byte on the fast path),
// and the merge loop. Short words use a linear scan for the lowest-ranked pair; long words use
// Hugging Face's heap with linked symbols. Both merge the lowest rank first, leftmost on ties,
// so they agree with each other and with tokenizers' Word::merge_all.
#include "text/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "base/error.h"
#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

constexpr uint32_t kNoRank = ~uint32_t{0};
// Up to this many symbols, rescanning all pairs after each merge beats heap bookkeeping.
constexpr size_t kShortWordSymbols = 48;

std::string quoted(std::string_view text) {
    // Appends rather than "'" + std::string(text): GCC 12 at -O3 warns (-Wrestrict) on that.
    std::string out(1, '\'');
    out.append(text);
    out.push_back('\'');
    return out;
}

}  // namespace

BpeModel::BpeModel(BpeSpec spec)
    : prefix_(std::move(spec.continuing_subword_prefix)),
      suffix_(std::move(spec.end_of_word_suffix)),
      fuse_unk_(spec.fuse_unk),
      byte_fallback_(spec.byte_fallback),
      ignore_merges_(spec.ignore_merges) {
    int64_t max_id = -1;
    for (const auto& [token, id] : spec.vocab) {
        if (id < 0 || id >= kMaxTokenId) {
            throw_corrupt(spec.vocab_field + "[" + quoted(token) + "]: id " + std::to_string(id) +
                          " is out of range [0, " + std::to_string(kMaxTokenId) + ")");
        }
        max_id = std::max(max_id, id);
    }
    tokens_.resize(static_cast<size_t>(max_id + 1));
    present_.assign(tokens_.size(), false);
    token_ids_.reserve(spec.vocab.size());
    for (auto& [token, id] : spec.vocab) {
        if (present_[static_cast<size_t>(id)]) {
            throw_corrupt(spec.vocab_field + ": id " + std::to_string(id) + " is used by both " +
                          quoted(tokens_[static_cast<size_t>(id)]) + " and " + quoted(token));
        }
        present_[static_cast<size_t>(id)] = true;
        tokens_[static_cast<size_t>(id)] = token;
        token_ids_.emplace(std::move(token), static_cast<int32_t>(id));
    }

    merges_ = MergeTable(spec.merges.size());
    std::string joined;
    for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
        const auto& [left, right] = spec.merges[rank];
        const std::string field = spec.merges_field + "[" + std::to_string(rank) + "]";
        const std::optional<int32_t> left_id = lookup(left);
        if (!left_id) throw_corrupt(field + ": " + quoted(left) + " is not in the vocabulary");
        const std::optional<int32_t> right_id = lookup(right);
        if (!right_id) throw_corrupt(field + ": " + quoted(right) + " is not in the vocabulary");
        if (right.size() < prefix_.size()) {
            throw_corrupt(field + ": " + quoted(right) +
                          " is shorter than continuing_subword_prefix");
        }
        // tokenizers strips prefix_len bytes from the right token without checking them.
        joined.assign(left);
        joined.append(right, prefix_.size());
        const std::optional<int32_t> merged_id = lookup(joined);
        if (!merged_id) {
            throw_corrupt(field + ": the merged token " + quoted(joined) +
                          " is not in the vocabulary");
        }
        merges_.insert(*left_id, *right_id, MergeRule{static_cast<uint32_t>(rank), *merged_id});
    }

    for (unsigned byte = 0; byte < 256; ++byte) {
        const std::optional<int32_t> id = lookup(byte_level_utf8(static_cast<uint8_t>(byte)));
        byte_ids_[byte] = id ? *id : -1;
    }
    if (spec.unk_token) {
        unk_id_ = lookup(*spec.unk_token);
        if (!unk_id_) {
            throw_corrupt("model.unk_token: " + quoted(*spec.unk_token) +
                          " is not in the vocabulary");
        }
    }
}

std::optional<int32_t> BpeModel::lookup(std::string_view token) const {
    const auto found = token_ids_.find(token);
    if (found == token_ids_.end()) return std::nullopt;
    return found->second;
}

std::optional<int32_t> BpeModel::token_id(std::string_view token) const {
    return lookup(token);
}

std::optional<std::string_view> BpeModel::token_text(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[static_cast<size_t>(id)]) {
        return std::nullopt;
    }
    return std::string_view(tokens_[static_cast<size_t>(id)]);
}

void BpeModel::tokenize(std::string_view piece, bool raw_bytes, BpeScratch& scratch,
                        std::vector<int32_t>& out) const {
    std::string_view word = piece;
    if (raw_bytes && (ignore_merges_ || !prefix_.empty() || !suffix_.empty())) {
        scratch.text.clear();
        append_byte_level(piece, scratch.text);
        word = scratch.text;
        raw_bytes = false;
    }
    if (ignore_merges_) {
        if (const std::optional<int32_t> id = lookup(word)) {
            out.push_back(*id);
            return;
        }
    }
    scratch.symbols.clear();
    bool fast = raw_bytes;
    if (fast) {
        for (const char byte : piece) {
            const int32_t id = byte_ids_[static_cast<uint8_t>(byte)];
            if (id < 0) {
                fast = false;
                break;
            }
            scratch.symbols.push_back(id);
        }
    }
    if (!fast) {
        if (raw_bytes) {
            scratch.text.clear();
            append_byte_level(piece, scratch.text);
            word = scratch.text;
        }
        initial_symbols(word, scratch);
    }
    merge_symbols(scratch);
    out.insert(out.end(), scratch.symbols.begin(), scratch.symbols.end());
}

void BpeModel::initial_symbols(std::string_view word, BpeScratch& scratch) const {
    scratch.symbols.clear();
    bool have_unk = false;
    size_t offset = 0;
    while (offset < word.size()) {
        const size_t length = utf8_sequence_length(static_cast<uint8_t>(word[offset]));
        const bool is_first = offset == 0;
        const bool is_last = offset + length >= word.size();
        std::string_view key = word.substr(offset, length);
        offset += length;
        if ((!is_first && !prefix_.empty()) || (is_last && !suffix_.empty())) {
            scratch.key.clear();
            if (!is_first) scratch.key.append(prefix_);
            scratch.key.append(key);
            if (is_last) scratch.key.append(suffix_);
            key = scratch.key;
        }
        if (const std::optional<int32_t> id = lookup(key)) {
            if (have_unk) scratch.symbols.push_back(*unk_id_);
            have_unk = false;
            scratch.symbols.push_back(*id);
            continue;
        }
        if (byte_fallback_) {
            // tokenizers looks up "<0xXX>" for every byte of the (prefixed) key; all or nothing.
            const size_t before = scratch.symbols.size();
            bool all_found = true;
            for (const char byte : key) {
                char name[8];
                std::snprintf(name, sizeof(name), "<0x%02X>",
                              static_cast<unsigned>(static_cast<uint8_t>(byte)));
                const std::optional<int32_t> id = lookup(name);
                if (!id) {
                    all_found = false;
                    break;
                }
                scratch.symbols.push_back(*id);
            }
            if (all_found) continue;
            scratch.symbols.resize(before);
        }
        if (!unk_id_) continue;  // without unk_token an unknown character is dropped
        if (have_unk && !fuse_unk_) scratch.symbols.push_back(*unk_id_);
        have_unk = true;
    }
    if (have_unk) scratch.symbols.push_back(*unk_id_);
}

void BpeModel::merge_symbols(BpeScratch& scratch) const {
    if (scratch.symbols.size() < 2) return;
    if (scratch.symbols.size() <= kShortWordSymbols) {
        merge_short(scratch);
    } else {
        merge_long(scratch);
    }
}

void BpeModel::merge_short(BpeScratch& scratch) const {
    std::vector<int32_t>& symbols = scratch.symbols;
    std::vector<uint32_t>& ranks = scratch.ranks;
    std::vector<int32_t>& merged = scratch.merged;
    const size_t n_pairs = symbols.size() - 1;
    ranks.resize(n_pairs);
    merged.resize(n_pairs);
    auto rank_pair = [&](size_t pair) {
        const MergeRule* rule = merges_.find(symbols[pair], symbols[pair + 1]);
        ranks[pair] = rule != nullptr ? rule->rank : kNoRank;
        merged[pair] = rule != nullptr ? rule->merged : -1;
    };
    for (size_t pair = 0; pair < n_pairs; ++pair) rank_pair(pair);
    while (!ranks.empty()) {
        size_t best = 0;
        for (size_t pair = 1; pair < ranks.size(); ++pair) {
            if (ranks[pair] < ranks[best]) best = pair;
        }
        if (ranks[best] == kNoRank) break;
        symbols[best] = merged[best];
        symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
        ranks.erase(ranks.begin() + static_cast<ptrdiff_t>(best));
        merged.erase(merged.begin() + static_cast<ptrdiff_t>(best));
        if (best > 0) rank_pair(best - 1);
        if (best < ranks.size()) rank_pair(best);
    }
}

void BpeModel::merge_long(BpeScratch& scratch) const {
    std::vector<int32_t>& symbols = scratch.symbols;
    const auto n = static_cast<int32_t>(symbols.size());
    std::vector<int32_t>& prev = scratch.prev;
    std::vector<int32_t>& next = scratch.next;
    prev.resize(symbols.size());
    next.resize(symbols.size());
    for (int32_t index = 0; index < n; ++index) {
        prev[index] = index - 1;
        next[index] = index + 1;
    }
    // Min-heap of (rank << 32 | position): lowest rank first, then leftmost.
    std::vector<uint64_t>& heap = scratch.heap;
    heap.clear();
    const std::greater<> later;
    auto push = [&](int32_t position) {
        const MergeRule* rule = merges_.find(symbols[position], symbols[next[position]]);
        if (rule == nullptr) return;
        heap.push_back((static_cast<uint64_t>(rule->rank) << 32) | static_cast<uint32_t>(position));
        std::push_heap(heap.begin(), heap.end(), later);
    };
    for (int32_t index = 0; index + 1 < n; ++index) push(index);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const uint64_t top = heap.back();
        heap.pop_back();
        const auto rank = static_cast<uint32_t>(top >> 32);
        const auto position = static_cast<int32_t>(top & 0xFFFFFFFFu);
        if (symbols[position] < 0) continue;  // merged into its left neighbour
        const int32_t right = next[position];
        if (right >= n) continue;
        const MergeRule* rule = merges_.find(symbols[position], symbols[right]);
        if (rule == nullptr || rule->rank != rank) continue;  // stale entry
        symbols[position] = rule->merged;
        symbols[right] = -1;
        next[position] = next[right];
        if (next[right] < n) prev[next[right]] = position;
        if (prev[position] >= 0) push(prev[position]);
        if (next[position] < n) push(position);
    }
    symbols.erase(std::remove(symbols.begin(), symbols.end(), -1), symbols.end());
}

}  // namespace cherenkov::text
