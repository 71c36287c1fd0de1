// GPT-2's byte-to-unicode alphabet (openai/gpt-2 encoder.py `bytes_to_unicode`, as used by
// Hugging Face's ByteLevel pre-tokenizer and decoder): printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100 onwards, so every byte string becomes printable text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cherenkov::text {

// The code point byte `byte` is written as.
char32_t byte_level_code_point(uint8_t byte);

// The UTF-8 form (1 or 2 bytes) of byte_level_code_point(byte).
std::string_view byte_level_utf8(uint8_t byte);

// The byte that `code_point` stands for, or nullopt when it is not in the alphabet.
std::optional<uint8_t> byte_level_byte(char32_t code_point);

// Appends the byte-level form of every byte of `bytes` to `out`.
void append_byte_level(std::string_view bytes, std::string& out);

// Hugging Face's ByteLevel decoding of one token: its characters mapped back to bytes, or the
// token's own UTF-8 bytes when any character is outside the alphabet.
void append_byte_level_decoded(std::string_view token, std::string& out);

}  // namespace cherenkov::text
