// Incremental decoding for generation: push ids one at a time and get back only complete UTF-8
// text. Bytes of a character split across tokens are held until it completes; the
// concatenation of every push() and finish() equals Tokenizer::decode of all the ids.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer/tokenizer.h"

namespace cherenkov::text {

class StreamingDetokenizer {
public:
    explicit StreamingDetokenizer(Tokenizer tokenizer, bool skip_special = false);

    // The text `id` completes (possibly empty). Throws InvalidInput for an unknown id.
    std::string push(int32_t id);
    // Text still held: an unfinished character becomes U+FFFD. Resets for a new sequence.
    std::string finish();

    // Bytes held back waiting for the rest of a character.
    size_t n_pending_bytes() const { return pending_.size(); }

private:
    Tokenizer tokenizer_;
    bool skip_special_;
    bool first_ = true;
    std::string pending_;
};

}  // namespace cherenkov::text
