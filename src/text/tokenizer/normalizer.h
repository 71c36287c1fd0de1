// The tokenizer.json "normalizer": Unicode normalization forms (NFC, NFD, NFKC, NFKD through
// utf8proc), possibly chained by "Sequence"; no normalizer at all is the empty chain.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::text {

enum class UnicodeForm { Nfc, Nfd, Nfkc, Nfkd };

class Normalizer {
public:
    Normalizer() = default;
    explicit Normalizer(std::vector<UnicodeForm> steps) : steps_(std::move(steps)) {}

    bool empty() const { return steps_.empty(); }

    // Normalizes valid UTF-8 `text`. Returns a view of `text` itself when no step changes it,
    // otherwise of `buffer`, which it overwrites.
    std::string_view normalize(std::string_view text, std::string& buffer) const;

private:
    std::vector<UnicodeForm> steps_;
};

}  // namespace cherenkov::text
