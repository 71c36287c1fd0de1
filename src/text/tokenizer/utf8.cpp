// UTF-8 validation and lossy conversion following the Unicode "maximal subpart" practice
// (Unicode core spec §3.9, Table 3-7 ranges), which is what Rust's from_utf8_lossy implements.
#include "text/tokenizer/utf8.h"

#include <cstring>

namespace cherenkov::text {
namespace {

// Range of the second byte of a sequence, which depends on the lead byte (Table 3-7).
struct SecondByteRange {
    uint8_t low;
    uint8_t high;
};

SecondByteRange second_byte_range(uint8_t lead) {
    switch (lead) {
        case 0xE0: return {0xA0, 0xBF};
        case 0xED: return {0x80, 0x9F};
        case 0xF0: return {0x90, 0xBF};
        case 0xF4: return {0x80, 0x8F};
        default: return {0x80, 0xBF};
    }
}

// Width of a valid sequence starting with `lead`, or 0 when `lead` can never start one.
size_t valid_sequence_width(uint8_t lead) {
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

bool is_continuation(uint8_t byte) {
    return (byte & 0xC0) == 0x80;
}

// Classifies the sequence at `bytes[pos]` (lead byte >= 0x80). Returns the number of bytes
// that form a complete valid character, or sets `invalid_length` to the maximal subpart.
// `incomplete` is set when the input ends inside a sequence that is valid so far.
size_t scan_sequence(std::string_view bytes, size_t pos, size_t& invalid_length, bool& incomplete) {
    const auto lead = static_cast<uint8_t>(bytes[pos]);
    invalid_length = 0;
    incomplete = false;
    const size_t width = valid_sequence_width(lead);
    if (width == 0) {
        invalid_length = 1;
        return 0;
    }
    if (pos + 1 >= bytes.size()) {
        incomplete = true;
        invalid_length = 1;
        return 0;
    }
    const auto second = static_cast<uint8_t>(bytes[pos + 1]);
    const SecondByteRange range = second_byte_range(lead);
    if (second < range.low || second > range.high) {
        invalid_length = 1;
        return 0;
    }
    size_t length = 2;
    while (length < width) {
        if (pos + length >= bytes.size()) {
            incomplete = true;
            invalid_length = length;
            return 0;
        }
        if (!is_continuation(static_cast<uint8_t>(bytes[pos + length]))) {
            invalid_length = length;
            return 0;
        }
        ++length;
    }
    return width;
}

}  // namespace

size_t find_invalid_utf8(std::string_view bytes) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        // Skip ASCII sixteen bytes at a time.
        while (pos + 16 <= bytes.size()) {
            uint64_t words[2];
            std::memcpy(words, bytes.data() + pos, sizeof(words));
            if (((words[0] | words[1]) & 0x8080808080808080ULL) != 0) break;
            pos += 16;
        }
        if (pos >= bytes.size()) break;
        if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
            ++pos;
            continue;
        }
        size_t invalid_length = 0;
        bool incomplete = false;
        const size_t width = scan_sequence(bytes, pos, invalid_length, incomplete);
        if (width == 0) return pos;
        pos += width;
    }
    return kValidUtf8;
}

size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final_chunk) {
    static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    size_t pos = 0;
    size_t run_start = 0;  // start of the pending run of valid bytes
    while (pos < bytes.size()) {
        if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
            ++pos;
            continue;
        }
        size_t invalid_length = 0;
        bool incomplete = false;
        const size_t width = scan_sequence(bytes, pos, invalid_length, incomplete);
        if (width != 0) {
            pos += width;
            continue;
        }
        out.append(bytes.substr(run_start, pos - run_start));
        if (incomplete && !final_chunk) return pos;
        out.append(kReplacement);
        pos += invalid_length;
        run_start = pos;
    }
    out.append(bytes.substr(run_start, pos - run_start));
    return pos;
}

char32_t decode_utf8_at(std::string_view text, size_t offset) {
    const auto lead = static_cast<uint8_t>(text[offset]);
    const size_t length = utf8_sequence_length(lead);
    if (length == 1 || offset + length > text.size()) return lead;
    char32_t code_point = lead & (0x7F >> length);
    for (size_t index = 1; index < length; ++index) {
        code_point = (code_point << 6) | (static_cast<uint8_t>(text[offset + index]) & 0x3F);
    }
    return code_point;
}

void append_utf8(char32_t code_point, std::string& out) {
    if (code_point < 0x80) {
        out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
}

}  // namespace cherenkov::text
