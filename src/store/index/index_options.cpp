#include "store/index/index_options.h"

#include <cstdlib>

#include "model_data/hub/hub_repo.h"
#include "model_data/hub/hub_token.h"

namespace cherenkov::store {

IndexOptions index_options_from_environment(const std::string& root,
                                            const std::string& explicit_hf_token) {
    IndexOptions options;
    options.paths = resolve_storage_paths(root, PathEnvironment::from_process());
    options.root = root;
    const char* endpoint = std::getenv("HF_ENDPOINT");
    options.hub.endpoint = model_data::hub::normalize_endpoint(endpoint == nullptr ? "" : endpoint);
    options.hub.http.bearer_token = model_data::hub::resolve_token(
        explicit_hf_token, model_data::hub::TokenEnvironment::from_process());
    return options;
}

void emit(const IndexOptions& options, const IndexEvent& event) {
    if (options.events) options.events(event);
}

ProgressCallback pack_events(const IndexOptions& options) {
    return [&options](const PackProgress& progress) {
        emit(options, IndexEvent{IndexEvent::Kind::Pack, progress.phase, progress.items_done,
                                 progress.items_total, progress.bytes_done, progress.bytes_total});
    };
}

void emit_status(const IndexOptions& options, const std::string& message) {
    emit(options, IndexEvent{IndexEvent::Kind::Status, message, 0, 0, 0, 0});
}

}  // namespace cherenkov::store
