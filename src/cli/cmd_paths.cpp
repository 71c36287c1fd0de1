// `cherenkov paths [--root DIR] [--json]`: where data, scratch and configuration live, the
// index files, the deprecated download location and the default model. Creates nothing.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/index_flags.h"
#include "store/index/storage_paths.h"

namespace cherenkov::cli {

Command register_paths(CLI::App& parent) {
    struct Args {
        IndexFlags flags;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = parent.add_subcommand("paths", "Print storage paths and the default model");
    add_root_flag(*app, args->flags);
    app->add_flag("--json", args->json, "Print JSON");
    auto run = [args] {
        const store::StoragePaths paths =
            store::resolve_storage_paths(args->flags.root, store::PathEnvironment::from_process());
        const nlohmann::json out{
            {"data", paths.data},
            {"scratch", paths.scratch},
            {"config", paths.config},
            {"index", paths.index_file()},
            {"artifacts", paths.artifacts_dir()},
            {"leases", paths.leases_dir()},
            {"downloaded_model", paths.downloaded_model(store::kDefaultModelRepo)},
            {"default_model", store::default_model_reference()}};
        if (args->json) {
            std::cout << out.dump(2) << '\n';
            return 0;
        }
        for (const char* key : {"data", "scratch", "config", "index", "artifacts", "leases",
                                "downloaded_model", "default_model"}) {
            std::cout << key << ": " << out[key].get<std::string>() << '\n';
        }
        return 0;
    };
    return Command{app, run};
}

}  // namespace cherenkov::cli
