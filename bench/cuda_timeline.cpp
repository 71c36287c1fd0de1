// A timeline of everything a CUDA program does on the device and at its CUDA API, for profiling
// on machines where Nsight Systems cannot run (the GPU machine's nsys writes no report). The
// driver loads this library into the program when CUDA_INJECTION64_PATH names it, and calls
// InitializeInjection(); CUPTI's activity API then records, with one clock for host and device:
//   K  kernels (concurrent kernel records: start, end, stream, graph, name),
//   C  memory copies (kind, bytes), S memsets,
//   A  runtime API calls (which thread, which call),
//   Y  host synchronisations (stream, event and context synchronise; stream waits on events).
// At exit every record is written as one tab-separated line to $CK_TIMELINE_OUT
// (default cuda_timeline.tsv); bench/cuda_timeline.py cuts it into steps and says where the time
// went. The trace costs a little per kernel and API call, so figures taken under it are for
// shares and gaps, not for reported speeds (run the same command without it for those).
#include <cupti.h>

#include <cxxabi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8 << 20;

struct Record {
    char kind;  // K, C, S, A or Y (above)
    uint64_t start;
    uint64_t end;
    uint32_t stream_or_thread;
    uint32_t correlation;
    uint32_t graph;
    uint64_t bytes;   // copies and memsets
    uint32_t detail;  // copy kind, API callback id or synchronisation type
    const std::string* name;  // kernels: interned demangled name
};

std::mutex g_mutex;
std::vector<Record> g_records;
std::unordered_map<std::string, std::string> g_names;  // mangled -> demangled, owns the strings
bool g_written = false;

const std::string* intern(const char* mangled) {
    std::string key = mangled ? mangled : "?";
    auto it = g_names.find(key);
    if (it != g_names.end()) return &it->second;
    int status = 0;
    char* plain = abi::__cxa_demangle(key.c_str(), nullptr, nullptr, &status);
    std::string value = status == 0 && plain ? plain : key;
    std::free(plain);
    return &g_names.emplace(key, std::move(value)).first->second;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
}

void take(const CUpti_Activity* record) {
    Record r{};
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
            r = {'K', k->start, k->end, k->streamId, k->correlationId, k->graphId, 0, 0,
                 intern(k->name)};
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            r = {'C', c->start, c->end, c->streamId, c->correlationId, c->graphId, c->bytes,
                 c->copyKind, nullptr};
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            r = {'S', s->start, s->end, s->streamId, s->correlationId, s->graphId, s->bytes, 0,
                 nullptr};
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME: {
            auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
            r = {'A', a->start, a->end, a->threadId, a->correlationId, 0, 0, a->cbid, nullptr};
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
            r = {'Y', y->start, y->end, y->streamId, y->correlationId, 0, 0,
                 static_cast<uint32_t>(y->type), nullptr};
            break;
        }
        default:
            return;
    }
    g_records.push_back(r);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        CUpti_Activity* record = nullptr;
        while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) take(record);
        size_t dropped = 0;
        cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
        if (dropped) std::fprintf(stderr, "cuda_timeline: %zu records dropped\n", dropped);
    }
    std::free(buffer);
}

const char* api_name(uint32_t cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name)
        return "?";
    return name;
}

void write_records() {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_written) return;
    g_written = true;
    const char* path = std::getenv("CK_TIMELINE_OUT");
    if (!path || !*path) path = "cuda_timeline.tsv";
    FILE* out = std::fopen(path, "w");
    if (!out) {
        std::fprintf(stderr, "cuda_timeline: cannot write %s: %s\n", path, std::strerror(errno));
        return;
    }
    std::fprintf(out, "# kind\tstart_ns\tend_ns\tstream_or_thread\tcorrelation\tgraph\tbytes\tdetail\tname\n");
    for (const Record& r : g_records) {
        const char* name = r.kind == 'K' ? r.name->c_str() : r.kind == 'A' ? api_name(r.detail) : "";
        std::fprintf(out, "%c\t%llu\t%llu\t%u\t%u\t%u\t%llu\t%u\t%s\n", r.kind,
                     static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                     r.stream_or_thread, r.correlation, r.graph,
                     static_cast<unsigned long long>(r.bytes), r.detail, name);
    }
    std::fclose(out);
    std::fprintf(stderr, "cuda_timeline: %zu records -> %s\n", g_records.size(), path);
}

bool check(CUptiResult result, const char* what) {
    if (result == CUPTI_SUCCESS) return true;
    const char* text = nullptr;
    cuptiGetResultString(result, &text);
    std::fprintf(stderr, "cuda_timeline: %s failed: %s\n", what, text ? text : "?");
    return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
    if (!check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
               "cuptiActivityRegisterCallbacks"))
        return 0;
    // Enabled one by one: a kind the driver refuses is said and the rest still recorded.
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernel records");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "copy records");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "memset records");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "runtime API records");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), "synchronisation records");
    // Registered during cuInit, after the CUDA runtime's own exit handlers: runs before them.
    std::atexit(write_records);
    return 1;
}
