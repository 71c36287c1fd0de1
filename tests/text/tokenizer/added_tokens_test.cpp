// Added-token matching against the expectations of Hugging Face tokenizers' own unit tests
// (tokenizers/src/tokenizer/added_vocabulary.rs: test_single_word_is_correct,
// test_single_word_is_unicode_correct, test_lstrip_unicode_space, test_encode_special_tokens).
// Those run with a Lowercase normalizer that leaves these tokens unchanged; here there is no
// normalizer, so the expected pieces keep their case. As there, special tokens are
// normalized=false (matched in the raw text) and the others normalized=true (matched after).
#include "text/tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::text {
namespace {

struct Piece {
    std::string text;
    int32_t id;
    bool operator==(const Piece& other) const { return text == other.text && id == other.id; }
};

std::ostream& operator<<(std::ostream& out, const Piece& piece) {
    return out << "(\"" << piece.text << "\", " << piece.id << ")";
}

AddedTokenSpec token(std::string content, bool special = false) {
    AddedTokenSpec spec;
    spec.content = std::move(content);
    spec.special = special;
    spec.normalized = !special;
    spec.field = "test";
    return spec;
}

// Both passes, as encoding runs them: raw-text tokens, then normalized tokens in what is left.
std::vector<Piece> split(const AddedVocabulary& vocabulary, std::string_view text,
                         bool parse_special = true) {
    std::vector<AddedSegment> segments;
    vocabulary.split(text, AddedVocabulary::Pass::Raw, parse_special, segments);
    std::vector<Piece> pieces;
    for (const AddedSegment& segment : segments) {
        const std::string_view part = text.substr(segment.begin, segment.end - segment.begin);
        if (segment.id >= 0) {
            pieces.push_back({std::string(part), segment.id});
            continue;
        }
        std::vector<AddedSegment> inner;
        vocabulary.split(part, AddedVocabulary::Pass::Normalized, parse_special, inner);
        for (const AddedSegment& piece : inner) {
            if (piece.end == piece.begin) continue;
            pieces.push_back(
                {std::string(part.substr(piece.begin, piece.end - piece.begin)), piece.id});
        }
    }
    return pieces;
}

AddedVocabulary make(const std::vector<AddedTokenSpec>& tokens) {
    const BpeModel model{BpeSpec{}};
    AddedVocabulary vocabulary;
    vocabulary.add_tokens(tokens, model, Normalizer());
    vocabulary.finalize();
    return vocabulary;
}

TEST(AddedVocabulary, SingleWordMatchesOnlyWholeWords) {
    AddedTokenSpec mask = token("<mask>");
    mask.single_word = true;
    const AddedVocabulary vocabulary = make({mask});
    EXPECT_EQ(split(vocabulary, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
              (std::vector<Piece>{{"<mask>", 0},
                                  {" My name ", -1},
                                  {"<mask>", 0},
                                  {" A<mask> <mask>ony ", -1},
                                  {"<mask>", 0}}));
}

TEST(AddedVocabulary, SingleWordTreatsCombiningMarksAsWordCharacters) {
    AddedTokenSpec mask = token("<mask>");
    mask.single_word = true;
    const AddedVocabulary vocabulary = make({mask});
    EXPECT_EQ(split(vocabulary, "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>"),
              (std::vector<Piece>{
                  {"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- \xE2\x97\x8C\xCC\xB0<mask>", -1}}));
}

TEST(AddedVocabulary, StripsUnicodeSpacesWithoutOverlappingMatches) {
    AddedTokenSpec mask = token("<mask>");
    mask.lstrip = mask.rstrip = mask.single_word = true;
    const AddedVocabulary vocabulary = make({mask});
    EXPECT_EQ(split(vocabulary, "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
              (std::vector<Piece>{{"Hi", -1},
                                  {" <mask> ", 0},
                                  {"there", -1},
                                  {"\t<mask>\t", 0},
                                  {"<mask>\xE2\x80\x80", 0}}));
}

TEST(AddedVocabulary, SkipsSpecialTokensWhenNotParsingThem) {
    AddedTokenSpec mask = token("<mask>", /*special=*/true);
    mask.lstrip = mask.rstrip = mask.single_word = true;
    const AddedVocabulary vocabulary =
        make({mask, token("ask>"), token("<pad>", /*special=*/true)});
    const std::string text = "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80 <pad> <mask><pad><pad>";
    EXPECT_EQ(split(vocabulary, text, /*parse_special=*/false),
              (std::vector<Piece>{{"Hi <m", -1},
                                  {"ask>", 1},
                                  {" there\t<m", -1},
                                  {"ask>", 1},
                                  {"\t<m", -1},
                                  {"ask>", 1},
                                  {"\xE2\x80\x80 <pad> <m", -1},
                                  {"ask>", 1},
                                  {"<pad><pad>", -1}}));
    EXPECT_EQ(split(vocabulary, text), (std::vector<Piece>{{"Hi", -1},
                                                           {" <mask> ", 0},
                                                           {"there", -1},
                                                           {"\t<mask>\t", 0},
                                                           {"<mask>\xE2\x80\x80 ", 0},
                                                           {"<pad>", 2},
                                                           {" <mask>", 0},
                                                           {"<pad>", 2},
                                                           {"<pad>", 2}}));
}

TEST(AddedVocabulary, RejectsADeclaredIdThatDisagreesWithTheAssignedOne) {
    AddedTokenSpec first = token("<a>");
    first.declared_id = 0;
    AddedTokenSpec second = token("<b>");
    second.declared_id = 5;
    second.field = "added_tokens[1]";
    const BpeModel model{BpeSpec{}};
    AddedVocabulary vocabulary;
    try {
        vocabulary.add_tokens({first, second}, model, Normalizer());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(e.what()).find("added_tokens[1].id"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cherenkov::text
