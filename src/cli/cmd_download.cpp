// `cherenkov download [REPO] [--revision REV] [--metadata-only]` (deprecated: use `prepare`):
// downloads an HF checkpoint into data/downloads/owner/name, outside the index, and prints its
// path; `prepare PATH` registers and packs it. Branches and tags resolve to full commits.
#include <iostream>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/index_flags.h"
#include "cli/progress_display.h"
#include "store/index/hf_download.h"
#include "store/index/prepare_command.h"
#include "store/index/selector.h"

namespace cherenkov::cli {

Command register_download(CLI::App& parent) {
    struct Args {
        IndexFlags flags;
        std::string repo;
        std::string revision;
        bool metadata_only = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = parent.add_subcommand(
        "download", "Deprecated: download an HF checkpoint (use `prepare`, with --keep-source)");
    app->add_option("repo", args->repo, "owner/name or hf://owner/name[@revision]");
    app->add_option("--revision", args->revision, "Branch, tag or commit (default: main)");
    app->add_flag("--metadata-only", args->metadata_only, "Fetch config and tokenizer files only");
    add_root_flag(*app, args->flags);
    add_token_flag(*app, args->flags);
    auto run = [args] {
        store::HfUri uri;
        if (args->repo.empty()) {
            uri.repo = std::string(store::kDefaultModelRepo);
            uri.revision = std::string(store::kDefaultModelCommit);
        } else {
            uri = store::parse_hf_uri(args->repo.rfind("hf://", 0) == 0 ? args->repo
                                                                        : "hf://" + args->repo);
        }
        if (!args->revision.empty()) {
            if (uri.revision)
                throw_invalid("give the revision either after '@' or with --revision");
            uri.revision = args->revision;
        }
        // The replacement for this very download, ready to paste.
        const std::string selector =
            "hf://" + uri.repo + (uri.revision ? "@" + *uri.revision : std::string());
        log_warn("download", "`download` is deprecated; use `" +
                                 store::prepare_command(selector, "--keep-source",
                                                        index_options(args->flags, nullptr)) +
                                 "` (--keep-source retains the weights)");
        std::string directory;
        store::SnapshotResult result;
        {
            ProgressDisplay display;
            const store::IndexOptions options = index_options(args->flags, &display);
            directory = options.paths.downloaded_model(uri.repo);
            store::SnapshotDownload request{uri.repo, uri.revision.value_or("main"),
                                            args->metadata_only, 0};
            result = store::download_snapshot(request, directory, options);
        }
        std::cout << directory << '\n';
        std::cerr << "cherenkov: downloaded hf://" << uri.repo << "@" << result.commit << " ("
                  << result.bytes_downloaded << " bytes this run)\n";
        return 0;
    };
    return Command{app, run};
}

}  // namespace cherenkov::cli
