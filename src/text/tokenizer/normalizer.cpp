// Unicode normalization through utf8proc, held to the Unicode version Hugging Face tokenizers
// normalizes with. ASCII text is invariant under every form and skips the library entirely.
#include "text/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/error.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

struct CodePointRange {
    char32_t first;
    char32_t last;
};

// tokenizers normalizes with unicode-normalization-alignments 0.1.12, whose tables are Unicode
// 9.0 (measured: it leaves U+32FF, U+A7F2, U+1FBF0 undecomposed and gives U+07FD, U+0D3B, U+1DF6
// combining class 0). utf8proc has Unicode 15. These are the code points assigned after 9.0 that
// utf8proc gives a decomposition, a nonzero combining class or a composition (Age from Perl's
// Unicode::UCD charprop, Unicode 14 there, unassigned counted as new; properties from
// utf8proc_get_property). To Unicode 9 they are unassigned: starters that never decompose or
// compose, so each one splits the text into parts that normalize independently.
constexpr CodePointRange kNormalizingSinceUnicode10[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},
    {0xC3C, 0xC3C},     {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},
    {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},   {0x32FF, 0x32FF},   {0xA7F2, 0xA7F4},
    {0xA82C, 0xA82C},   {0xAB69, 0xAB69},   {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B},
    {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x11935, 0x11935},
    {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42},
    {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1},
    {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE},
    {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

bool normalizes_only_since_unicode10(char32_t code_point) {
    if (code_point < 0x7FD) return false;
    const auto* end = std::end(kNormalizingSinceUnicode10);
    const auto* found = std::upper_bound(
        std::begin(kNormalizingSinceUnicode10), end, code_point,
        [](char32_t value, const CodePointRange& range) { return value < range.first; });
    return found != std::begin(kNormalizingSinceUnicode10) && code_point <= (found - 1)->last;
}

bool is_ascii(std::string_view text) {
    for (const char byte : text) {
        if (static_cast<unsigned char>(byte) >= 0x80) return false;
    }
    return true;
}

bool is_compatibility(UnicodeForm form) {
    return form == UnicodeForm::Nfkc || form == UnicodeForm::Nfkd;
}

bool is_composing(UnicodeForm form) {
    return form == UnicodeForm::Nfc || form == UnicodeForm::Nfkc;
}

utf8proc_option_t options_for(UnicodeForm form) {
    int options = UTF8PROC_STABLE | (is_composing(form) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE);
    if (is_compatibility(form)) options |= UTF8PROC_COMPAT;
    return static_cast<utf8proc_option_t>(options);
}

// How a code point takes part in normalizing to `form`.
enum class Role {
    // Never changes, never reorders with or composes into its neighbours: the text can be cut
    // before it and the parts normalized separately.
    Boundary,
    // Unassigned in Unicode 9 (see kNormalizingSinceUnicode10): a boundary kept as it is.
    Unicode9Unassigned,
    // Anything else; it is normalized together with the boundary before it.
    Active,
};

Role role_of(char32_t code_point, UnicodeForm form) {
    if (code_point < 0x80) return Role::Boundary;
    if (normalizes_only_since_unicode10(code_point)) return Role::Unicode9Unassigned;
    // Hangul composes algorithmically: vowel and trailing jamo join the syllable before them.
    if ((code_point >= 0x1161 && code_point <= 0x1175) ||
        (code_point >= 0x11A8 && code_point <= 0x11C2)) {
        return Role::Active;
    }
    if (code_point >= 0xAC00 && code_point <= 0xD7A3) {
        return is_composing(form) ? Role::Boundary : Role::Active;
    }
    const utf8proc_property_t* property =
        utf8proc_get_property(static_cast<utf8proc_int32_t>(code_point));
    if (property->combining_class != 0) return Role::Active;
    if (property->decomp_seqindex != UINT16_MAX &&
        (is_compatibility(form) || property->decomp_type == 0)) {
        return Role::Active;
    }
    // utf8proc marks a code point that can be the second of a composed pair with >= 0x8000.
    if (property->comb_index != UINT16_MAX && property->comb_index >= 0x8000) return Role::Active;
    return Role::Boundary;
}

// Appends `text` normalized to `form` by utf8proc, without its allocating utf8proc_map.
void normalize_part(std::string_view text, UnicodeForm form,
                    std::vector<utf8proc_int32_t>& code_points, std::string& out) {
    const utf8proc_option_t options = options_for(form);
    const auto* input = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    const auto length = static_cast<utf8proc_ssize_t>(text.size());
    if (code_points.size() < text.size() + 8) code_points.resize(text.size() + 8);
    utf8proc_ssize_t count =
        utf8proc_decompose(input, length, code_points.data(),
                           static_cast<utf8proc_ssize_t>(code_points.size()), options);
    if (count > static_cast<utf8proc_ssize_t>(code_points.size())) {
        code_points.resize(static_cast<size_t>(count));
        count = utf8proc_decompose(input, length, code_points.data(), count, options);
    }
    if (count >= 0) count = utf8proc_normalize_utf32(code_points.data(), count, options);
    if (count < 0)
        throw_invalid(std::string("Unicode normalization failed: ") + utf8proc_errmsg(count));
    for (utf8proc_ssize_t index = 0; index < count; ++index) {
        append_utf8(static_cast<char32_t>(code_points[static_cast<size_t>(index)]), out);
    }
}

// Normalizes `text` to `form` into `out` and returns true, or returns false when no part of it
// can change (leaving `out` alone). Each run that starts at a boundary and holds an active code
// point is normalized on its own; everything else is copied.
bool apply_form(std::string_view text, UnicodeForm form, std::vector<utf8proc_int32_t>& code_points,
                std::string& out) {
    size_t run_start = 0;
    bool run_active = false;
    bool run_unassigned = false;  // the run starts with a Unicode9Unassigned code point
    size_t copied_until = 0;
    bool changed = false;
    auto flush = [&](size_t run_end) {
        if (!run_active) return;
        if (!changed) {
            out.clear();
            changed = true;
        }
        out.append(text.substr(copied_until, run_start - copied_until));
        size_t part_start = run_start;
        if (run_unassigned) {
            part_start += utf8_sequence_length(static_cast<uint8_t>(text[run_start]));
            out.append(text.substr(run_start, part_start - run_start));
        }
        normalize_part(text.substr(part_start, run_end - part_start), form, code_points, out);
        copied_until = run_end;
    };
    size_t offset = 0;
    while (offset < text.size()) {
        const auto lead = static_cast<uint8_t>(text[offset]);
        const size_t length = utf8_sequence_length(lead);
        const Role role =
            lead < 0x80 ? Role::Boundary : role_of(decode_utf8_at(text, offset), form);
        if (role == Role::Active) {
            run_active = true;
        } else {
            flush(offset);
            run_start = offset;
            run_active = false;
            run_unassigned = role == Role::Unicode9Unassigned;
        }
        offset += length;
    }
    flush(text.size());
    if (changed) out.append(text.substr(copied_until));
    return changed;
}

}  // namespace

std::string_view Normalizer::normalize(std::string_view text, std::string& buffer) const {
    if (steps_.empty() || is_ascii(text)) return text;
    std::vector<utf8proc_int32_t> code_points;
    std::string_view current = text;
    std::string next;
    for (const UnicodeForm form : steps_) {
        if (!apply_form(current, form, code_points, next)) continue;
        buffer.swap(next);
        current = buffer;
    }
    return current;
}

}  // namespace cherenkov::text
