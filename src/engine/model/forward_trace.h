// Optional capture of intermediate values during a forward call, named like the reference
// fixture's intermediates (tests/fixtures/README.md: "layers.{l}.attn_hc.mix", "embed", ...), so
// tests can find the first stage that diverges. Rows of successive calls are appended.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cherenkov::engine {

struct ForwardTrace {
    std::map<std::string, std::vector<float>> tensors;

    void record(const std::string& name, const float* data, int64_t n) {
        auto& v = tensors[name];
        v.insert(v.end(), data, data + n);
    }
};

}  // namespace cherenkov::engine
