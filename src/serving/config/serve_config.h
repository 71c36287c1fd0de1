// Every setting of `cherenkov serve`, typed, in the units of the configuration file
// (docs/configuration.md; cherenkov.example.toml lists them with their defaults). The built-in
// defaults come from the structs the server fills from these, so the two cannot drift.
// settings_catalog.h names, checks and documents each field.
#pragma once

#include <cstdint>
#include <string>

#include "engine/experts/pool_setting.h"
#include "engine/model/prefill_quantum.h"
#include "serving/config/generation_defaults.h"
#include "serving/http_server.h"
#include "serving/prefix_cache.h"
#include "serving/session_store.h"
#include "serving/worker.h"

namespace cherenkov::serving::config {

// [server]: where the server listens and what it serves.
struct ServerSettings {
    std::string host = HttpOptions{}.host;
    int64_t port = HttpOptions{}.port;
    std::string model;      // an alias, ID, URI or commit prefix in the model index
    std::string model_dir;  // a store directory (exclusive with model)
    std::string root;       // the model index's data root; empty: the XDG paths
    std::string socket;     // the control socket; empty: $TMPDIR/cherenkov-UID/control.sock
    int64_t max_ctx = HttpOptions{}.max_ctx;
    std::string backend = "auto";
    int64_t threads = 0;  // CPU threads; 0: every online CPU
    // The CPU's matmul activations: auto (f32 on the CPU backend, q8 for CUDA's CPU experts),
    // f32 or q8.
    std::string cpu_activations = "auto";
};

// [limits]: admission, request size, prefill chunks and the memory admission may reserve.
struct LimitSettings {
    int64_t max_active = WorkerOptions{}.max_active;
    int64_t max_queued = WorkerOptions{}.max_queued;
    int64_t max_body_mb = static_cast<int64_t>(HttpOptions{}.max_body_bytes >> 20);
    int64_t write_timeout_seconds = HttpOptions{}.write_timeout.count();
    engine::PrefillQuantum prefill_quantum;
    double prefill_chunk_seconds = WorkerOptions{}.prefill_chunk_seconds;
    std::string state_memory_gb = "auto";  // decimal GB, or auto: a quarter of free memory
};

// [experts]: the routed experts' precision, caches, reads and speculation.
struct ExpertSettings {
    int64_t resident_bits = 4;
    int64_t miss_bits = 0;  // 0: as resident_bits
    // --pool-gb and --host-pool-gb as the engine takes them; the file spells them as numbers of
    // decimal GB or words (engine::pool_setting_text).
    engine::PoolSetting pool_gb;
    engine::PoolSetting host_pool_gb = engine::PoolSetting::of(engine::PoolMode::Staging);
    // cuda: decode misses computed on the CPU: off, auto or a share 0-1 (engine/cuda/cpu_experts.h)
    std::string cpu_experts = "auto";
    std::string cache_policy = "lru";
    double cut_weak = 0.0;
    int64_t io_threads = 0;  // 0: half the online CPUs, 4 to 8
    bool buffered_io = false;
    bool build_missing_store = true;
    int64_t drafts = 2;
};

// [prefix_cache]
struct PrefixCacheSettings {
    int64_t max_mb = static_cast<int64_t>(PrefixCacheOptions{}.max_bytes >> 20);
    int64_t max_entries = PrefixCacheOptions{}.max_entries;
    double idle_seconds = PrefixCacheOptions{}.idle_seconds;
    int64_t interval_tokens = PrefixCacheOptions{}.interval_tokens;
};

// [sessions]
struct SessionSettings {
    int64_t max_sessions = SessionOptions{}.max_sessions;
    int64_t memory_mb = static_cast<int64_t>(SessionOptions{}.max_bytes >> 20);
    double idle_seconds = SessionOptions{}.idle_seconds;
};

struct ServeConfig {
    ServerSettings server;
    LimitSettings limits;
    ExpertSettings experts;
    PrefixCacheSettings prefix_cache;
    SessionSettings sessions;
    GenerationDefaults defaults;  // [defaults] and [defaults.sampling]: the reloadable part
};

}  // namespace cherenkov::serving::config
