#include "engine/runtime/loaded_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "engine/cpu/matmul.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_info.h"
#include "engine/experts/expert_source_factory.h"
#include "engine/experts/record_reader.h"
#include "engine/experts/replacement_policy.h"
#include "engine/runtime/checked_backend.h"
#include "store/index/model_store_update.h"
#include "store/index/prepare_command.h"
#include "store/manifest/store_manifest.h"
#include "store/store_check.h"
#include "store/store_update.h"

namespace cherenkov::engine {

namespace {

// VmRSS / VmHWM of this process in bytes (0 when /proc is unavailable).
uint64_t proc_status_bytes(const std::string& key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key + ":", 0) == 0) {
            std::istringstream fields(line.substr(key.size() + 1));
            uint64_t kib = 0;
            fields >> kib;
            return kib * 1024;
        }
    }
    return 0;
}

std::string join_bits(const std::vector<int>& bits) {
    std::string text;
    for (int width : bits) text += (text.empty() ? "" : ",") + std::to_string(width);
    return text;
}

// The store directory that holds every expert table `bits` needs: `store_dir` itself, or the
// store published when missing parts were built (build_missing_store). For an indexed model that
// includes metadata its local or retained source can fill (seed "Prepare and run": automatic
// repairs follow the build policy of missing variants).
std::string ensure_store_parts(const LoadOptions& options, const std::string& store_dir,
                               const std::vector<int>& bits) {
    std::vector<int> low_bits;
    for (int width : bits) {
        if (width != 4) low_bits.push_back(width);
    }
    const std::vector<int> rebuild_bits = options.repack ? low_bits : std::vector<int>{};
    if (!options.build_missing_store && !options.repack) {
        if (low_bits.empty()) return store_dir;  // experts.bin is checked with the store
        const store::StoreChanges changes = store::plan_store_changes(store_dir, low_bits, "");
        if (changes.missing_bits.empty()) return store_dir;
        // Name the model as the caller named it, so the command works when pasted.
        const std::string selector =
            options.resolved != nullptr ? options.resolved->selector : store_dir;
        const int width = changes.missing_bits.front();
        throw_not_found(store_dir + ": no Q" + std::to_string(width) + " expert table (" +
                        store::lowbit_manifest_name(width) +
                        " missing or invalid) and building missing stores at load is off; "
                        "build it with `" +
                        store::prepare_command(selector,
                                               "--experts " + join_bits(changes.missing_bits),
                                               options.index) +
                        "`");
    }
    if (options.resolved != nullptr && !options.resolved->model_id.empty()) {
        const store::PrepareResult built = store::complete_resolved_store(
            *options.resolved, low_bits, options.index, rebuild_bits);
        for (int width : built.derived) {
            log_info("engine", "built " + store::lowbit_experts_name(width) + " at load in " +
                                   options.resolved->store_dir);
        }
        return options.resolved->store_dir;
    }
    if (low_bits.empty()) return store_dir;
    // A store directory given directly is nobody's artifact: changed in place, as `prepare`
    // does with an unregistered directory.
    store::ResolvedModel direct;
    direct.store_dir = store_dir;
    store::complete_resolved_store(direct, low_bits, options.index, rebuild_bits);
    return store_dir;
}

}  // namespace

void validate_load_options(const LoadOptions& options) {
    const auto is_width = [](int bits) { return bits == 4 || bits == 3 || bits == 2; };
    if (!is_width(options.expert_bits)) {
        throw_invalid("--experts must be 4, 3 or 2, got " + std::to_string(options.expert_bits));
    }
    if (options.miss_bits != 0 && !is_width(options.miss_bits)) {
        throw_invalid("--miss-experts must be 4, 3 or 2, got " + std::to_string(options.miss_bits));
    }
    // Seed "Precision and memory": mixed mode keeps Q4 residents and reads only unpredicted
    // misses at --miss-experts precision.
    if (options.miss_bits != 0 && options.miss_bits != options.expert_bits &&
        options.expert_bits != 4) {
        throw_invalid("--miss-experts " + std::to_string(options.miss_bits) +
                      " needs 4-bit residents (--experts 4), got --experts " +
                      std::to_string(options.expert_bits) +
                      ": mixed mode reads unpredicted misses at lower precision than Q4");
    }
    // A routing weight is a softmax probability (renormalized over the top-k or not), so it
    // lies in [0, 1]; 0 turns the cut off.
    if (!(options.cut_weak >= 0.0F && options.cut_weak <= 1.0F)) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", static_cast<double>(options.cut_weak));
        throw_invalid(std::string("--cut-weak ") + value +
                      " is out of range: it is a routing weight, 0 (off) to 1");
    }
    if (options.repack && options.expert_bits == 4 &&
        (options.miss_bits == 0 || options.miss_bits == 4)) {
        throw_invalid(
            "--repack rebuilds the low-bit expert table a run reads (--experts 3|2 or "
            "--miss-experts 3|2); with Q4 only there is none: experts.bin comes from prepare");
    }
    if (options.threads < 0) throw_invalid("--threads must be 0 (every CPU) or more");
    if (options.io_threads < 0) throw_invalid("--io-threads must be 0 (automatic) or more");
    if (options.max_rows < 1) throw_invalid("rows per decode step must be at least 1");
    if (options.max_ctx < 1) throw_invalid("--max-ctx must be at least 1");
    if (options.pool.mode == PoolMode::Staging) {
        throw_invalid("--pool-gb staging: only --host-pool-gb stages reads for a device pool");
    }
    if (options.backend != "cpu" && options.backend != "cuda" && options.backend != "auto") {
        throw_invalid("--backend '" + options.backend + "': expected cpu, cuda or auto");
    }
    parse_replacement_kind(options.policy);
}

std::string resolve_backend(const std::string& requested) {
    if (requested == "cpu" || requested == "cuda") return requested;
    if (requested == "auto") {
        const cuda::DeviceQuery query = cuda::query_devices();
        return query.devices.empty() ? "cpu" : "cuda";
    }
    throw_invalid("--backend '" + requested + "': expected cpu, cuda or auto");
}

std::unique_ptr<LoadedModel> LoadedModel::load(const LoadOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    namespace fs = std::filesystem;
    validate_load_options(options);
    if (!fs::is_directory(options.store_dir))
        throw_not_found(options.store_dir + ": no such directory");
    if (!store::looks_like_store(options.store_dir)) {
        throw_invalid(options.store_dir +
                      " is not a packed store (no manifest.json); prepare it with `" +
                      store::prepare_command(options.store_dir, "", options.index) +
                      "` and run the model by the name that prints");
    }
    std::vector<int> bits = {options.expert_bits};
    if (options.miss_bits != 0 && options.miss_bits != options.expert_bits)
        bits.push_back(options.miss_bits);
    const std::string store_dir = ensure_store_parts(options, options.store_dir, bits);
    // manifest.json and config.json are read once (config.json perhaps by the caller) and
    // handed to what needs them. A store published while building parts is read afresh.
    store::CheckedStore checked =
        store::check_store(store_dir, store_dir == options.store_dir ? options.config : nullptr);
    std::unique_ptr<LoadedModel> loaded(new LoadedModel());
    ExpertSourceOptions base;
    base.cache.tables = find_expert_tables(store_dir, bits, checked.manifest);
    loaded->weights_ =
        load_model_weights(store_dir, std::move(checked.manifest), std::move(checked.config),
                           WeightLoadOptions{.mtp = options.draft_head});
    loaded->expert_bits_ = options.expert_bits;
    loaded->prefill_quantum_ = options.prefill_quantum;
    base.cache.resident_bits = options.expert_bits;
    base.cache.miss_bits = options.miss_bits;
    base.cache.policy = parse_replacement_kind(options.policy);
    base.cache.cut_weak = options.cut_weak;
    // Auto: 8 threads beat 4 on the 16-core H200 machine (warm RAM-tier prefill 124 -> 191-201
    // tok/s, decode 84-92 -> 87-110), while small machines keep 4 beside their compute threads.
    base.cache.n_io_threads =
        options.io_threads > 0
            ? options.io_threads
            : std::clamp(static_cast<int>(std::thread::hardware_concurrency() / 2), 4, 8);
    // --tuning io_piece_kib=N sets the read piece size (0: whole records), for A/B runs.
    if (options.tuning.io_piece_kib >= 0) {
        base.cache.io_piece_bytes = static_cast<uint64_t>(options.tuning.io_piece_kib) << 10;
    }
    if (options.buffered_io) base.cache.direct_io = DirectIo::Off;
    // --tuning cpu_avx512=off keeps the int8 matmuls on AVX2 (the kernel family is per process).
    set_kernel_path(options.tuning.cpu_avx512 || !cpu_has_avx512_vnni() ? KernelPath::Auto
                                                                        : KernelPath::Avx2);
    base.max_rows = std::max<int64_t>(options.max_rows, 1);
    base.top_k = loaded->weights_->config.num_experts_per_tok;
    base.fixed_bytes = loaded->weights_->resident_bytes();
    // On the CPU a prefill chunk's activations live in host memory: an adaptive host pool keeps
    // them outside (the larger of this and the usual headroom). A chunk's expert union needs no
    // reservation: up to min(rows · top-k, experts) experts per layer, fetched in groups of at
    // most the pool's slots (ExpertSource::max_batch_experts), so a pool of one decode step's
    // union serves any chunk, with more reads.
    const uint64_t cpu_chunk_scratch = static_cast<uint64_t>(options.prefill_quantum.rows()) *
                                       prefill_scratch_row_bytes(loaded->weights_->config);
    // The host expert source with `pool` (the table in place when Mapped), and the CPU model
    // over it.
    // `activations`: the CPU model's matmuls; with cuda it is the --check reference, so F32.
    const auto build_host_side = [&](const PoolSetting& pool, ActivationPrecision activations) {
        ExpertSourceOptions source = base;
        source.pool = pool;
        BuiltExpertSource built = make_expert_source(std::move(source));
        loaded->model_.reset();
        loaded->experts_ = std::move(built.source);
        loaded->pool_bytes_ = built.budget.bytes;
        loaded->pool_description_ = built.budget.description;
        if (!loaded->pool_) loaded->pool_ = std::make_unique<ThreadPool>(options.threads);
        loaded->model_ = std::make_unique<Model>(*loaded->weights_, *loaded->experts_,
                                                 *loaded->pool_, activations);
        loaded->cpu_activations_ = activations;
        loaded->backend_ = loaded->model_.get();
    };
    std::string backend = resolve_backend(options.backend);
    if (backend == "cuda" && options.pool.mode == PoolMode::Mapped) {
        throw_invalid(
            "--pool-gb mapped uses the expert table in place on the cpu; with --backend cuda the "
            "device pool needs a size (N, max or adaptive), and --host-pool-gb mapped maps the "
            "table behind it");
    }
    if (backend == "cuda") {
        // The device pool caches; the host pool stages reads into it (or is the RAM tier). The
        // chunk's activations are on the device, so the host keeps no scratch for them.
        // The device copies records out of the host pool by DMA: buffered reads leave them out
        // of the CPU caches (record_reader.h; --tuning nt_fill=off for A/B runs).
        if (options.tuning.nt_fill) base.cache.open_reader = open_file_record_reader_for_dma;
        build_host_side(options.host_pool, ActivationPrecision::F32);
        cuda::CudaModelOptions device;
        device.pool = options.pool;
        device.max_rows = base.max_rows;
        device.tuning = options.tuning;
        device.max_ctx = options.max_ctx;
        device.max_bits = std::max(options.expert_bits, options.miss_bits);
        device.cache_policy = base.cache.policy;
        device.prefill_quantum = options.prefill_quantum;
        device.cpu_experts = options.cpu_experts;
        device.cpu_pool = loaded->pool_.get();
        device.cpu_activations = options.cpu_activations.value_or(ActivationPrecision::Q8);
        try {
            loaded->cuda_model_ =
                cuda::make_cuda_model(*loaded->weights_, *loaded->experts_, device);
            loaded->backend_ = loaded->cuda_model_.get();
            loaded->pool_description_ =
                loaded->cuda_model_->backend_stats().device.value_or(DeviceFigures{}).expert_pool +
                "; host " + loaded->pool_description_;
        } catch (const Error& e) {
            // `auto` asked for the GPU only if it can take the model; an explicit request fails.
            const bool fallback =
                options.backend == "auto" &&
                (e.kind() == ErrorKind::ResourceExhausted || e.kind() == ErrorKind::Unsupported);
            if (!fallback) throw;
            log_warn("engine",
                     std::string("cuda backend not usable, running on the cpu: ") + e.what());
            backend = "cpu";
        }
    }
    if (backend == "cpu") {
        base.reserve_bytes = cpu_chunk_scratch;
        build_host_side(options.pool, options.cpu_activations.value_or(ActivationPrecision::F32));
    }
    loaded->backend_name_ = backend;
    if (options.check) {
        loaded->checked_ = make_checked_backend(*loaded->backend_, *loaded->model_);
        loaded->backend_ = loaded->checked_.get();
    }
    loaded->loaded_at_ = std::chrono::steady_clock::now();
    loaded->load_seconds_ = std::chrono::duration<double>(loaded->loaded_at_ - start).count();
    return loaded;
}

int64_t LoadedModel::prefill_chunk_tokens() const {
    return prefill_chunk_rows(*backend_, prefill_quantum_);
}

uint64_t LoadedModel::expert_bytes_read() const {
    return experts_->figures().read_bytes;
}

EngineStats LoadedModel::observe(const SequenceState* state) const {
    EngineStats stats;
    stats.observed_at =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    stats.uptime_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded_at_).count();
    stats.load_seconds = load_seconds_;
    stats.backend = backend_name_;
    stats.cpu_activations = activation_precision_name(cpu_activations_);
    stats.cpu_kernels = kernel_path_name(active_kernel_path());
    stats.expert_bits = expert_bits_;
    stats.prefill_quantum = prefill_quantum_.rows();
    stats.prefill_chunk_tokens = prefill_chunk_tokens();
    MemoryFigures& m = stats.memory;
    m.rss_bytes = proc_status_bytes("VmRSS");
    m.peak_rss_bytes = proc_status_bytes("VmHWM");
    m.dense_bytes = weights_->resident_bytes();
    m.draft_head = weights_->mtp.has_value();
    m.ngram_mapped_bytes = weights_->ngram_file ? weights_->ngram_file->bytes().size() : 0;
    m.state_bytes = state != nullptr ? state->bytes() : 0;
    m.expert_record_bytes = experts_->layout().record_bytes;
    m.expert_pool_bytes = pool_bytes_;
    ExpertSourceFigures experts = experts_->figures();
    stats.experts = std::move(experts.cache);
    stats.experts_read_bytes = experts.read_bytes;
    stats.prefill = prefill_counters_.totals();
    if (cuda_model_) {
        stats.backend_stats = cuda_model_->backend_stats();
        stats.gpu_timing = gpu_timing_of(cuda_model_->gpu_stage_totals());
        stats.prefill_gpu_timing = gpu_timing_of(cuda_model_->prefill_gpu_stage_totals());
    } else {
        stats.gpu_timing.status = "not applicable: the " + backend_name_ + " backend has no GPU";
        stats.prefill_gpu_timing.status = stats.gpu_timing.status;
    }
    return stats;
}

nlohmann::json LoadedModel::memory_stats(const SequenceState* state) const {
    return memory_json(observe(state));
}

}  // namespace cherenkov::engine
