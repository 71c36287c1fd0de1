// Test support for suites run over every reference fixture form: the forms, gtest's name for
// each ("tiny_a/hf_flat_fused" → tiny_a_hf_flat_fused), and the fixture's reference folder.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace cherenkov::testing {

// Every fixture checkpoint form with transformers references (tests/fixtures/README.md).
#define CHERENKOV_FIXTURE_FORMS                                                   \
    ::testing::Values("tiny_a/hf_flat_fused", "tiny_b/hf_nested_experts_sharded", \
                      "tiny_c/hf_nested_fused", "tiny_c/mlx_q4")

inline std::string fixture_form_name(const ::testing::TestParamInfo<const char*>& info) {
    std::string name = info.param;
    for (char& ch : name) {
        if (ch == '/') ch = '_';
    }
    return name;
}

// "tiny_a/hf_flat_fused" → "tiny_a/reference".
inline std::string reference_of(const std::string& checkpoint) {
    return checkpoint.substr(0, checkpoint.find('/')) + "/reference";
}

}  // namespace cherenkov::testing
