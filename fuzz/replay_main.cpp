// Runs a fuzz target over every file of a corpus directory (or over single files), so the
// normal build and ctest exercise each target's seeds without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
    size_t n_inputs = 0;
    for (int arg = 1; arg < argc; ++arg) {
        std::filesystem::path path(argv[arg]);
        if (std::filesystem::is_directory(path)) {
            for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
                if (!entry.is_regular_file()) continue;
                replay_file(entry.path());
                ++n_inputs;
            }
        } else {
            replay_file(path);
            ++n_inputs;
        }
    }
    std::printf("replayed %zu inputs\n", n_inputs);
    return n_inputs > 0 ? 0 : 1;
}
