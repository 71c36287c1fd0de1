// PLE n-gram hashing against the constants and the test vector of docs/qwen4_exp.md §3.4, and
// the tiny-config constants of §7.
#include "model_data/qwen4_exp/ngram_hashing.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::model_data::qwen4_exp {
namespace {

NgramHashParams fn_params() {
    NgramHashParams params;
    params.vocab_size = 248320;
    params.seed = 1234;
    params.ngram_size = 3;
    params.heads_per_ngram = 8;
    params.vocab_size_base = 20000000;
    params.divisible_by = 128;
    params.eos_token_id = 248044;
    return params;
}

NgramHashParams tiny_params() {
    NgramHashParams params;
    params.vocab_size = 256;
    params.seed = 1234;
    params.ngram_size = 3;
    params.heads_per_ngram = 2;
    params.vocab_size_base = 101;
    params.divisible_by = 8;
    params.eos_token_id = 2;
    return params;
}

TEST(NgramHashing, Splitmix64MatchesReferenceOutput) {
    // First output of the reference SplitMix64 generator seeded with 0.
    EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFULL);
}

TEST(NgramHashing, PrimalityIsExactOn64BitValues) {
    EXPECT_FALSE(is_prime_u64(0));
    EXPECT_FALSE(is_prime_u64(1));
    EXPECT_TRUE(is_prime_u64(2));
    EXPECT_TRUE(is_prime_u64(37));
    EXPECT_FALSE(is_prime_u64(561));                     // Carmichael
    EXPECT_FALSE(is_prime_u64(3825123056546413051));     // strong pseudoprime to bases 2..23
    EXPECT_TRUE(is_prime_u64(2305843009213693951));      // 2^61 - 1
    EXPECT_TRUE(is_prime_u64(9223372036854775783));      // largest prime below 2^63
    EXPECT_TRUE(is_prime_u64(18446744073709551557ULL));  // largest 64-bit prime
    EXPECT_FALSE(is_prime_u64(18446744073709551615ULL));
    EXPECT_FALSE(is_prime_u64(4294967297));  // 641 · 6700417
    EXPECT_EQ(next_prime_at_least(20000000), 20000003u);
    EXPECT_EQ(next_prime_at_least(20000003), 20000003u);
    EXPECT_EQ(next_prime_at_least(0), 2u);
}

TEST(NgramHashing, FnConstants) {
    const NgramHash hash = build_ngram_hash(fn_params(), 0);
    EXPECT_EQ(hash.layer_multipliers,
              (std::vector<int64_t>{23703573157769, 20109073645365, 8052911324071}));
    // Every multiplier is odd and below 2·hb + 1 with hb = 18571544855136.
    for (int64_t multiplier : hash.layer_multipliers) {
        EXPECT_EQ(multiplier % 2, 1);
        EXPECT_LE(multiplier, 2 * int64_t{18571544855136} + 1);
    }
    EXPECT_EQ(hash.head_vocab_sizes,
              (std::vector<int64_t>{20000003, 20000023, 20000033, 20000047, 20000059, 20000063,
                                    20000069, 20000077, 20000081, 20000093, 20000107, 20000147,
                                    20000153, 20000159, 20000161, 20000171}));
    EXPECT_EQ(hash.head_offsets,
              (std::vector<int64_t>{0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228,
                                    140000297, 160000374, 180000455, 200000548, 220000655,
                                    240000802, 260000955, 280001114, 300001275}));
    EXPECT_EQ(hash.total_rows, 320001446);
    EXPECT_EQ(hash.padded_rows, 320001536);
    EXPECT_EQ(hash.padded_rows, 128 * 2500012);  // FN: 128 shards of 2 500 012 rows
}

TEST(NgramHashing, SecondPleLayerContinuesThePrimes) {
    const NgramHash second = build_ngram_hash(fn_params(), 1);
    EXPECT_EQ(second.head_vocab_sizes.front(), 20000213);
    EXPECT_EQ(second.head_offsets.front(), 0);
    EXPECT_NE(second.layer_multipliers, build_ngram_hash(fn_params(), 0).layer_multipliers);
}

TEST(NgramHashing, AllLayersContinueThePrimeSequence) {
    Config config;
    config.vocab_size = 248320;
    config.num_hidden_layers = 8;
    config.ple_layer_ids = {2, 6};
    config.eos_token_ids = {248044};
    const std::vector<NgramHash> hashes = build_all_ngram_hashes(config);
    ASSERT_EQ(hashes.size(), 2u);
    for (int64_t index = 0; index < 2; ++index) {
        const NgramHash single = build_ngram_hash(fn_params(), index);
        EXPECT_EQ(hashes[static_cast<size_t>(index)].head_vocab_sizes, single.head_vocab_sizes);
        EXPECT_EQ(hashes[static_cast<size_t>(index)].layer_multipliers, single.layer_multipliers);
        EXPECT_EQ(hashes[static_cast<size_t>(index)].padded_rows, single.padded_rows);
    }
    EXPECT_EQ(hashes[1].head_vocab_sizes.front(), 20000213);
    config.ple_layer_ids.clear();
    EXPECT_TRUE(build_all_ngram_hashes(config).empty());
}

TEST(NgramHashing, TinyConfigConstants) {
    const NgramHash hash = build_ngram_hash(tiny_params(), 0);
    EXPECT_EQ(hash.layer_multipliers,
              (std::vector<int64_t>{4295158889762567, 35454616657218897, 19285316470915801}));
    EXPECT_EQ(hash.head_vocab_sizes, (std::vector<int64_t>{101, 103, 107, 109}));
    EXPECT_EQ(hash.head_offsets, (std::vector<int64_t>{0, 101, 204, 311}));
    EXPECT_EQ(hash.total_rows, 420);
    EXPECT_EQ(hash.padded_rows, 424);
}

TEST(NgramHashing, FromConfigUsesFirstEos) {
    Config config;
    config.vocab_size = 256;
    config.ngram_size = 3;
    config.heads_per_ngram = 2;
    config.ngram_vocab_size_base = 101;
    config.make_ngram_vocab_size_divisible_by = 8;
    config.eos_token_ids = {2, 5};
    const NgramHash hash = build_ngram_hash(config, 0);
    EXPECT_EQ(hash.params.eos_token_id, 2);
    EXPECT_EQ(initial_ngram_context(hash), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(hash.padded_rows, 424);
}

// §3.4 test vector: 16 ids per token, FN constants, fresh context.
const std::vector<int64_t> kVectorTokens = {151644, 872, 198, 248044, 9707, 11};
const std::vector<std::vector<int64_t>> kVectorIds = {
    {9213577, 25503567, 59963735, 67280845, 97263283, 108604657, 126879742, 153604170, 163991649,
     192963728, 210734887, 224850479, 244505954, 265606139, 292960741, 312140635},
    {6954764, 37428000, 54939688, 74004108, 95568253, 116575022, 138540160, 142009604, 165349151,
     193458441, 202840010, 231812024, 252625381, 274082424, 294711253, 318927564},
    {6746895, 31942778, 54550641, 78212738, 81361934, 102413837, 123993646, 146103739, 175246506,
     190873805, 206877969, 222022136, 242132242, 262461054, 282619366, 303774792},
    {16849591, 37537304, 42290399, 73883125, 88405327, 114186760, 123740665, 158125394, 169423291,
     194333347, 208742846, 238789911, 242351884, 266971822, 295413699, 319385148},
    {16410909, 39682429, 55103279, 60931720, 87006904, 116506179, 131512017, 152932897, 169641436,
     182022480, 209277433, 237891023, 256841529, 277007269, 290665954, 300984276},
    {18158303, 36390029, 45652312, 70783524, 98191154, 114024957, 127804916, 159566246, 175132467,
     192583600, 217919476, 237199054, 259336807, 261799367, 289359313, 307699687},
};

TEST(NgramHashing, SpecTestVector) {
    const NgramHash hash = build_ngram_hash(fn_params(), 0);
    const std::vector<int64_t> context = initial_ngram_context(hash);
    EXPECT_EQ(context, (std::vector<int64_t>{248044, 248044}));
    const NgramIds result = ngram_ids(hash, context, kVectorTokens);
    ASSERT_EQ(result.ids.size(), 6u * 16u);
    for (size_t token = 0; token < kVectorTokens.size(); ++token) {
        const std::vector<int64_t> row(
            result.ids.begin() + static_cast<std::ptrdiff_t>(token * 16),
            result.ids.begin() + static_cast<std::ptrdiff_t>(token * 16 + 16));
        EXPECT_EQ(row, kVectorIds[token]) << "token " << kVectorTokens[token];
    }
    EXPECT_EQ(result.context, (std::vector<int64_t>{9707, 11}));
}

TEST(NgramHashing, SplitCallGivesTheSameIds) {
    const NgramHash hash = build_ngram_hash(fn_params(), 0);
    const std::vector<int64_t> first(kVectorTokens.begin(), kVectorTokens.begin() + 4);
    const std::vector<int64_t> second(kVectorTokens.begin() + 4, kVectorTokens.end());
    const NgramIds head = ngram_ids(hash, initial_ngram_context(hash), first);
    EXPECT_EQ(head.context, (std::vector<int64_t>{198, 248044}));
    const NgramIds tail = ngram_ids(hash, head.context, second);
    for (size_t token = 0; token < 6; ++token) {
        const std::vector<int64_t>& ids = token < 4 ? head.ids : tail.ids;
        const size_t row = token < 4 ? token : token - 4;
        const std::vector<int64_t> got(ids.begin() + static_cast<std::ptrdiff_t>(row * 16),
                                       ids.begin() + static_cast<std::ptrdiff_t>(row * 16 + 16));
        EXPECT_EQ(got, kVectorIds[token]) << "token " << token;
    }
    // One token at a time, through the allocation-free entry point.
    std::vector<int64_t> context = initial_ngram_context(hash);
    std::vector<int64_t> ids(16);
    for (size_t token = 0; token < 6; ++token) {
        ngram_ids_into(hash, context, std::span<const int64_t>(&kVectorTokens[token], 1), ids);
        EXPECT_EQ(ids, kVectorIds[token]) << "token " << token;
    }
}

TEST(NgramHashing, TokenAfterEosSeesOnlyEos) {
    const NgramHash hash = build_ngram_hash(tiny_params(), 0);
    // After EOS (2), token 7 hashes as if the context were fresh.
    const NgramIds fresh = ngram_ids(hash, initial_ngram_context(hash), std::vector<int64_t>{7});
    const NgramIds after = ngram_ids(hash, std::vector<int64_t>{9, 2}, std::vector<int64_t>{7});
    EXPECT_EQ(after.ids, fresh.ids);
    EXPECT_EQ(after.context, (std::vector<int64_t>{2, 7}));
    // With EOS one step further back, the bigram sees 5 but the trigram stops at EOS.
    const NgramIds partial = ngram_ids(hash, std::vector<int64_t>{2, 5}, std::vector<int64_t>{7});
    const uint64_t m0 = static_cast<uint64_t>(hash.layer_multipliers[0]);
    const uint64_t m1 = static_cast<uint64_t>(hash.layer_multipliers[1]);
    const uint64_t m2 = static_cast<uint64_t>(hash.layer_multipliers[2]);
    const uint64_t bigram = (7 * m0) ^ (5 * m1);
    const uint64_t trigram = bigram ^ (2 * m2);
    EXPECT_EQ(partial.ids[0], static_cast<int64_t>(bigram % 101));
    EXPECT_EQ(partial.ids[1], static_cast<int64_t>(bigram % 103) + 101);
    EXPECT_EQ(partial.ids[2], static_cast<int64_t>(trigram % 107) + 204);
    EXPECT_EQ(partial.ids[3], static_cast<int64_t>(trigram % 109) + 311);
}

TEST(NgramHashing, RejectsBadInput) {
    const NgramHash hash = build_ngram_hash(tiny_params(), 0);
    EXPECT_THROW(ngram_ids(hash, std::vector<int64_t>{2}, std::vector<int64_t>{7}), Error);
    EXPECT_THROW(ngram_ids(hash, std::vector<int64_t>{2, 2}, std::vector<int64_t>{256}), Error);
    EXPECT_THROW(ngram_ids(hash, std::vector<int64_t>{2, -1}, std::vector<int64_t>{3}), Error);
    std::vector<int64_t> context = {2, 2};
    std::vector<int64_t> too_small(3);
    EXPECT_THROW(ngram_ids_into(hash, context, std::vector<int64_t>{1}, too_small), Error);
    NgramHashParams bad = tiny_params();
    bad.eos_token_id = -1;
    EXPECT_THROW(build_ngram_hash(bad, 0), Error);
    bad = tiny_params();
    bad.ngram_size = 1;
    EXPECT_THROW(build_ngram_hash(bad, 0), Error);
}

TEST(NgramHashing, CompareHashBuffers) {
    const NgramHash hash = build_ngram_hash(tiny_params(), 0);
    const std::string layer = "model.layers.1.ple.ple_embedding";
    HashBuffers same{hash.layer_multipliers, hash.head_vocab_sizes, hash.head_offsets};
    EXPECT_TRUE(compare_hash_buffers(hash, same, layer).empty());
    EXPECT_TRUE(compare_hash_buffers(hash, HashBuffers{}, layer).empty());  // absent

    HashBuffers different = same;
    different.head_vocab_sizes[2] = 113;
    different.head_offsets = {0, 101};
    const auto mismatches = compare_hash_buffers(hash, different, layer);
    ASSERT_EQ(mismatches.size(), 2u);
    EXPECT_EQ(mismatches[0],
              layer +
                  ".ngram_heads_vocab_sizes: 1 of 4 values differ; first at [2]: checkpoint "
                  "113, computed 107");
    EXPECT_EQ(mismatches[1], layer + ".ngram_heads_offsets: checkpoint has 2 values, computed 4");
}

TEST(NgramHashing, AdoptCheckpointBuffers) {
    const NgramHash hash = build_ngram_hash(tiny_params(), 0);
    HashBuffers stored;
    stored.head_vocab_sizes = {101, 103, 113, 109};
    stored.head_offsets = {0, 101, 204, 317};
    const NgramHash adopted = adopt_checkpoint_buffers(hash, stored, "layer 1");
    EXPECT_EQ(adopted.head_vocab_sizes, stored.head_vocab_sizes);
    EXPECT_EQ(adopted.layer_multipliers, hash.layer_multipliers);  // absent → computed
    EXPECT_EQ(adopted.total_rows, 426);
    EXPECT_EQ(adopted.padded_rows, 432);

    HashBuffers short_buffer;
    short_buffer.layer_multipliers = {1, 3};
    EXPECT_THROW(adopt_checkpoint_buffers(hash, short_buffer, "layer 1"), Error);
    HashBuffers zero_size;
    zero_size.head_vocab_sizes = {101, 0, 107, 109};
    try {
        adopt_checkpoint_buffers(hash, zero_size, "layer 1");
        ADD_FAILURE() << "accepted a zero head size";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find("ngram_heads_vocab_sizes[1]"), std::string::npos);
    }
}

}  // namespace
}  // namespace cherenkov::model_data::qwen4_exp
