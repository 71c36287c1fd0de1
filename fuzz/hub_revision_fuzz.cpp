// Fuzzes the parser of the Hub's revision answer (GET /api/models/{repo}/revision/{rev}): any
// text must parse or fail with cherenkov::Error; accepted file paths are relative and free of
// dot segments.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "model_data/hub/revision_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::model_data::hub;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const RevisionInfo info = parse_revision_info(text, "revision.json");
        if (info.commit.size() != 40) __builtin_trap();
        for (const RepoFile& file : info.files) {
            if (file.path.empty() || file.path.front() == '/' || file.path.find("..") == 0 ||
                file.path.find("/../") != std::string::npos)
                __builtin_trap();
        }
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
