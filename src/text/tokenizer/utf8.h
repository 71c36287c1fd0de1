// UTF-8 helpers for the tokenizer: validation (the rules of Rust's `str`, which Hugging Face
// tokenizers requires), lossy conversion (Rust's `String::from_utf8_lossy`: one U+FFFD per
// maximal invalid subpart) and code point stepping over text already known to be valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cherenkov::text {

inline constexpr size_t kValidUtf8 = static_cast<size_t>(-1);

// Returns the byte offset of the first invalid sequence in `bytes`, or kValidUtf8.
// Overlong forms, surrogates (U+D800..U+DFFF) and code points above U+10FFFF are invalid.
[[nodiscard]] size_t find_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out`, replacing each maximal invalid subpart with U+FFFD, as Rust's
// `from_utf8_lossy` does. With `final_chunk` false, a trailing sequence that is incomplete but
// could still become valid is left unconsumed. Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final_chunk = true);

// Length in bytes of the UTF-8 sequence starting with `lead` (1 for bytes that cannot start one).
inline size_t utf8_sequence_length(uint8_t lead) {
    if (lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return lead < 0xF8 ? 4 : 1;
}

// Decodes the code point at `text[offset]`; `text` must be valid UTF-8.
char32_t decode_utf8_at(std::string_view text, size_t offset);

void append_utf8(char32_t code_point, std::string& out);

}  // namespace cherenkov::text
