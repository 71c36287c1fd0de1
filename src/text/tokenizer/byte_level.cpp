// The byte-level alphabet as constant tables computed at compile time.
#include "text/tokenizer/byte_level.h"

#include <array>

#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

constexpr bool maps_to_itself(unsigned byte) {
    return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<char32_t, 256> make_code_points() {
    std::array<char32_t, 256> code_points{};
    char32_t next = 256;
    for (unsigned byte = 0; byte < 256; ++byte) {
        code_points[byte] = maps_to_itself(byte) ? byte : next++;
    }
    return code_points;
}

constexpr std::array<char32_t, 256> kCodePoints = make_code_points();

// Every code point of the alphabet is below U+0144, so the inverse is a small dense table.
constexpr size_t kInverseSize = 0x144;

constexpr std::array<int16_t, kInverseSize> make_inverse() {
    std::array<int16_t, kInverseSize> inverse{};
    for (auto& entry : inverse) entry = -1;
    for (unsigned byte = 0; byte < 256; ++byte) {
        inverse[kCodePoints[byte]] = static_cast<int16_t>(byte);
    }
    return inverse;
}

constexpr std::array<int16_t, kInverseSize> kInverse = make_inverse();

struct Utf8Forms {
    std::array<std::array<char, 2>, 256> bytes{};
    std::array<uint8_t, 256> lengths{};
};

constexpr Utf8Forms make_utf8_forms() {
    Utf8Forms forms{};
    for (unsigned byte = 0; byte < 256; ++byte) {
        const char32_t code_point = kCodePoints[byte];
        if (code_point < 0x80) {
            forms.bytes[byte][0] = static_cast<char>(code_point);
            forms.lengths[byte] = 1;
        } else {
            forms.bytes[byte][0] = static_cast<char>(0xC0 | (code_point >> 6));
            forms.bytes[byte][1] = static_cast<char>(0x80 | (code_point & 0x3F));
            forms.lengths[byte] = 2;
        }
    }
    return forms;
}

constexpr Utf8Forms kUtf8Forms = make_utf8_forms();

}  // namespace

char32_t byte_level_code_point(uint8_t byte) {
    return kCodePoints[byte];
}

std::string_view byte_level_utf8(uint8_t byte) {
    return {kUtf8Forms.bytes[byte].data(), kUtf8Forms.lengths[byte]};
}

std::optional<uint8_t> byte_level_byte(char32_t code_point) {
    if (code_point >= kInverseSize || kInverse[code_point] < 0) return std::nullopt;
    return static_cast<uint8_t>(kInverse[code_point]);
}

void append_byte_level(std::string_view bytes, std::string& out) {
    for (const char byte : bytes) out.append(byte_level_utf8(static_cast<uint8_t>(byte)));
}

void append_byte_level_decoded(std::string_view token, std::string& out) {
    const size_t start = out.size();
    size_t offset = 0;
    while (offset < token.size()) {
        const char32_t code_point = decode_utf8_at(token, offset);
        const std::optional<uint8_t> byte = byte_level_byte(code_point);
        if (!byte) {
            out.resize(start);
            out.append(token);
            return;
        }
        out.push_back(static_cast<char>(*byte));
        offset += utf8_sequence_length(static_cast<uint8_t>(token[offset]));
    }
}

}  // namespace cherenkov::text
