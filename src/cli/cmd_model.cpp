// `cherenkov model add SOURCE [--name ALIAS]`, `model list [--json]`,
// `model remove REF [--source-only]`, `model gc [--dry-run]` (docs/model-index.md).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/index_flags.h"
#include "cli/progress_display.h"
#include "store/index/collect.h"
#include "store/index/model_index.h"
#include "store/index/model_listing.h"
#include "store/index/register_model.h"

namespace cherenkov::cli {
namespace {

using nlohmann::json;

json find_listed(const json& listing, const std::string& model_id) {
    for (const auto& entry : listing["models"]) {
        if (entry["id"] == model_id) return entry;
    }
    return nullptr;
}

std::string describe_prepared(const json& entry) {
    if (!entry["prepared"].get<bool>()) return "no";
    std::string text;
    for (const auto& bits : entry["store"]["variants"]) {
        text += (text.empty() ? "q" : ",q") + std::to_string(bits.get<int>());
    }
    if (!entry["store"]["present"].get<bool>()) return "missing";
    return text.empty() ? "yes" : text;
}

void print_listing(const json& listing) {
    if (listing["models"].empty()) {
        std::cout << "no models in the index (add one with cherenkov model add SOURCE)\n";
        return;
    }
    std::printf("%-24s %-12s %-10s %10s  %s\n", "REFERENCE", "ID", "PREPARED", "SIZE", "SOURCE");
    for (const auto& entry : listing["models"]) {
        const uint64_t bytes =
            entry["store"].is_null() ? 0 : entry["store"]["bytes"].get<uint64_t>();
        std::string source = entry["source"]["uri"].get<std::string>();
        if (!entry["retained_source"].is_null()) source += "  (source retained)";
        std::printf("%-24s %-12s %-10s %10s  %s\n", entry["reference"].get<std::string>().c_str(),
                    entry["id"].get<std::string>().c_str(), describe_prepared(entry).c_str(),
                    bytes == 0 ? "-" : human_bytes(static_cast<double>(bytes)).c_str(),
                    source.c_str());
        for (const auto& exported : entry["exports"]) {
            std::printf("%-24s exported to %s\n", "", exported["path"].get<std::string>().c_str());
        }
    }
    std::printf("owned %s, external %s\n",
                human_bytes(listing["totals"]["owned_bytes"].get<double>()).c_str(),
                human_bytes(listing["totals"]["external_bytes"].get<double>()).c_str());
}

Command add_command(CLI::App& model_app) {
    struct Args {
        IndexFlags flags;
        std::string source;
        std::string alias;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = model_app.add_subcommand(
        "add", "Register a model's metadata (no weights are downloaded or packed)");
    app->add_option("source", args->source,
                    "hf://owner/repo[@revision], disk://STORE/owner/repo[@commit] or a path")
        ->required();
    app->add_option("--name", args->alias, "Alias to select the model by");
    app->add_flag("--json", args->json, "Print the index entry as JSON");
    add_root_flag(*app, args->flags);
    add_token_flag(*app, args->flags);
    auto run = [args] {
        json entry;
        bool created = false;
        {
            ProgressDisplay display;
            const store::IndexOptions options = index_options(args->flags, &display);
            const store::ModelIndex index(options.paths);
            const store::RegisteredModel registered = store::register_model(
                index, store::parse_selector(args->source), args->alias, options);
            created = registered.created;
            entry = find_listed(store::list_models(options), registered.model_id);
        }
        if (args->json) {
            std::cout << entry.dump(2) << '\n';
            return 0;
        }
        std::cout << (created ? "registered " : "already registered ")
                  << entry["reference"].get<std::string>() << "  "
                  << entry["source"]["uri"].get<std::string>() << '\n';
        return 0;
    };
    return Command{app, run};
}

Command list_command(CLI::App& model_app) {
    struct Args {
        IndexFlags flags;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = model_app.add_subcommand("list", "List indexed models (works offline)");
    app->add_flag("--json", args->json, "Print JSON");
    add_root_flag(*app, args->flags);
    auto run = [args] {
        const json listing = store::list_models(index_options(args->flags, nullptr));
        if (args->json) {
            std::cout << listing.dump(2) << '\n';
        } else {
            print_listing(listing);
        }
        return 0;
    };
    return Command{app, run};
}

Command remove_command(CLI::App& model_app) {
    struct Args {
        IndexFlags flags;
        std::string model;
        bool source_only = false;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = model_app.add_subcommand(
        "remove", "Remove a model's index entry, or only its retained source (deletes no files)");
    app->add_option("model", args->model, "Alias, ID, URI, commit prefix or path")->required();
    app->add_flag("--source-only", args->source_only,
                  "Release only the retained download, after checking the prepared store");
    app->add_flag("--json", args->json, "Print JSON");
    add_root_flag(*app, args->flags);
    auto run = [args] {
        const store::RemoveReport report = store::remove_model(index_options(args->flags, nullptr),
                                                               args->model, args->source_only);
        if (args->json) {
            std::cout << json{{"id", report.model_id},
                              {"reference", report.reference},
                              {"source_only", report.source_only},
                              {"released", report.released_artifacts}}
                             .dump(2)
                      << '\n';
            return 0;
        }
        std::cout << (report.source_only ? "released the retained source of " : "removed ")
                  << report.reference << "; run cherenkov model gc to reclaim space\n";
        return 0;
    };
    return Command{app, run};
}

Command gc_command(CLI::App& model_app) {
    struct Args {
        IndexFlags flags;
        bool dry_run = false;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* app = model_app.add_subcommand(
        "gc", "Delete unreferenced managed stores and downloads, and abandoned imports");
    app->add_flag("--dry-run", args->dry_run, "Report what would be removed; delete nothing");
    app->add_flag("--json", args->json, "Print JSON");
    add_root_flag(*app, args->flags);
    auto run = [args] {
        store::GcReport report;
        {
            ProgressDisplay display;
            report = store::collect_garbage(index_options(args->flags, &display), args->dry_run);
        }
        if (args->json) {
            json items = json::array();
            for (const auto& item : report.items) {
                items.push_back({{"id", item.artifact_id},
                                 {"kind", item.kind},
                                 {"owner", item.owner},
                                 {"path", item.path},
                                 {"action", item.action},
                                 {"reason", item.reason},
                                 {"bytes", item.bytes}});
            }
            std::cout << json{{"dry_run", report.dry_run},
                              {"items", items},
                              {"bytes_freed", report.bytes_freed}}
                             .dump(2)
                      << '\n';
            return 0;
        }
        const char* verb = report.dry_run ? "would remove" : "removed";
        for (const auto& item : report.items) {
            const std::string what = item.action == "delete"   ? verb
                                     : item.action == "forget" ? "forgot (files kept)"
                                                               : "kept";
            std::cout << what << "  " << item.kind << " " << item.artifact_id << "  " << item.reason
                      << "  " << human_bytes(static_cast<double>(item.bytes)) << "  " << item.path
                      << '\n';
        }
        std::cout << verb << " " << human_bytes(static_cast<double>(report.bytes_freed)) << '\n';
        return 0;
    };
    return Command{app, run};
}

}  // namespace

std::vector<Command> register_model_commands(CLI::App& parent) {
    CLI::App* model_app = parent.add_subcommand("model", "Manage the model index");
    model_app->require_subcommand(1);
    return {add_command(*model_app), list_command(*model_app), remove_command(*model_app),
            gc_command(*model_app)};
}

}  // namespace cherenkov::cli
