// What every model-index operation needs: where the files are, how to reach the Hub, and where
// progress goes. Built once at the edge (the CLI) from flags and the environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model_data/hub/hub_client.h"
#include "store/index/storage_paths.h"
#include "store/packer/packer.h"

namespace cherenkov::store {

// Progress of a long operation. Delivered serially on the calling thread, outside the index lock.
struct IndexEvent {
    enum class Kind {
        Status,    // `message` says what is happening (a spinner line)
        Headers,   // `done` of `total` safetensors headers read
        Download,  // `message` is the file; bytes of all files; `done` of `total` files
        Pack,      // `message` is the packing phase; bytes and items as the packer reports
    };
    Kind kind = Kind::Status;
    std::string message;
    uint64_t done = 0;
    uint64_t total = 0;
    uint64_t bytes_done = 0;
    uint64_t bytes_total = 0;
};

using IndexEvents = std::function<void(const IndexEvent&)>;

struct IndexOptions {
    StoragePaths paths;
    std::string root;                 // --root as given ("" : the XDG defaults), for messages
    model_data::hub::HubOptions hub;  // endpoint (HF_ENDPOINT) and token; never persisted
    IndexEvents events;               // may be empty
    unsigned n_threads = 0;           // packing threads, 0 = all cores
};

// Reads XDG_*/HOME (paths), HF_ENDPOINT, and the token sources (--hf-token first, then HF_TOKEN,
// HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH, $HF_HOME/token). For the edges only.
IndexOptions index_options_from_environment(const std::string& root,
                                            const std::string& explicit_hf_token);

void emit(const IndexOptions& options, const IndexEvent& event);
// A packer progress callback that reports through `options` as IndexEvent::Kind::Pack events
// (`options` must outlive it).
ProgressCallback pack_events(const IndexOptions& options);
void emit_status(const IndexOptions& options, const std::string& message);

}  // namespace cherenkov::store
