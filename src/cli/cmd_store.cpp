// `cherenkov store add NAME ROOT [--layout default|hf-cache]`, `store list [--json]`,
// `store enable|disable|remove NAME`: filesystem stores that disk://NAME/owner/repo selects from.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/index_flags.h"
#include "store/index/file_stores.h"
#include "store/index/model_index.h"
#include "store/index/model_listing.h"

namespace cherenkov::cli {
namespace {

Command store_toggle(CLI::App& store_app, const char* name, const char* help) {
    struct Args {
        IndexFlags flags;
        std::string name;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = store_app.add_subcommand(name, help);
    app->add_option("name", args->name, "Store name")->required();
    add_root_flag(*app, args->flags);
    const std::string verb = name;
    auto run = [args, verb] {
        const store::ModelIndex index(index_options(args->flags, nullptr).paths);
        if (verb == "remove") {
            store::remove_store(index, args->name);
            std::cout << "removed store " << args->name << " (files are left in place)\n";
        } else {
            store::set_store_enabled(index, args->name, verb == "enable");
            std::cout << verb << "d store " << args->name << '\n';
        }
        return 0;
    };
    return Command{app, run};
}

}  // namespace

std::vector<Command> register_store_commands(CLI::App& parent) {
    CLI::App* store_app = parent.add_subcommand("store", "Manage filesystem stores");
    store_app->require_subcommand(1);
    std::vector<Command> commands;

    struct AddArgs {
        IndexFlags flags;
        std::string name;
        std::string root_dir;
        std::string layout = "default";
    };
    auto add = std::make_shared<AddArgs>();
    CLI::App* add_app = store_app->add_subcommand("add", "Register a filesystem store");
    add_app->add_option("name", add->name, "Store name, used in disk://NAME/owner/repo")
        ->required();
    add_app->add_option("root_dir", add->root_dir, "Store root directory")->required();
    add_app->add_option("--layout", add->layout, "default (ROOT/owner/repo) or hf-cache")
        ->check(CLI::IsMember({"default", "hf-cache"}));
    add_root_flag(*add_app, add->flags);
    commands.push_back(
        Command{add_app, [add] {
                    const store::ModelIndex index(index_options(add->flags, nullptr).paths);
                    const store::FsStore created =
                        store::add_store(index, add->name, add->root_dir,
                                         store::parse_store_layout(add->layout, "--layout"));
                    std::cout << "registered store " << created.name << " (" << created.id
                              << ") at " << created.root << ", layout "
                              << store::store_layout_name(created.layout) << '\n';
                    return 0;
                }});

    struct ListArgs {
        IndexFlags flags;
        bool json = false;
    };
    auto list = std::make_shared<ListArgs>();
    CLI::App* list_app = store_app->add_subcommand("list", "List filesystem stores");
    list_app->add_flag("--json", list->json, "Print JSON");
    add_root_flag(*list_app, list->flags);
    commands.push_back(Command{
        list_app, [list] {
            const nlohmann::json stores = store::list_stores(index_options(list->flags, nullptr));
            if (list->json) {
                std::cout << stores.dump(2) << '\n';
                return 0;
            }
            if (stores["stores"].empty()) std::cout << "no filesystem stores\n";
            for (const auto& entry : stores["stores"]) {
                std::cout << entry["name"].get<std::string>() << "  "
                          << entry["root"].get<std::string>() << "  "
                          << entry["layout"].get<std::string>()
                          << (entry["enabled"].get<bool>() ? "" : "  (disabled)") << '\n';
            }
            return 0;
        }});

    commands.push_back(store_toggle(*store_app, "enable", "Allow disk:// selectors of a store"));
    commands.push_back(store_toggle(*store_app, "disable", "Block disk:// selectors of a store"));
    commands.push_back(
        store_toggle(*store_app, "remove", "Delete a store's registration (not its files)"));
    return commands;
}

}  // namespace cherenkov::cli
