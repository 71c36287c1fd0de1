// Host → device copies of one expert record from page-locked memory, the way the RAM tier makes
// them (docs/cuda-backend.md, "Where a RAM-tier decode layer's time goes": in the engine a 2.76 MB
// record's copy completed 85-130 µs after it was issued, where back-to-back copies run at
// ~52 GB/s). Each case times copies with CUDA events on their own stream (the copy alone) and
// from the host's issue to the event's completion:
//   back-to-back   copies queued one after another (the probes' usual figure)
//   isolated       one copy, then the host spins idle for --gap-us before the next
//   fresh          isolated, the record rewritten by a CPU thread just before (as a pread from the
//                  page cache leaves it: its lines dirty in the CPU caches)
//   fresh-nt       the same, rewritten with non-temporal stores (nothing left in the caches)
//   behind-kernel  isolated, issued while a kernel of --kernel-us runs on another stream
//   under-load     isolated, issued while a kernel that streams HBM on every multiprocessor runs
//                  on another stream (as the expert GEMVs do while a layer's misses are copied)
//   pread          isolated, the record read just before from a file in the page cache by another
//                  thread (exactly what an IO worker does with --buffered-io)
//   pair           two records queued at once after the gap (a decode layer has ~2.5 misses)
//   mapped         isolated, straight from a read-only mapping of that file registered with
//                  cudaHostRegister (no pread, no staging copy); and mapped-b2b back-to-back
//   host_copy_probe [--bytes N] [--gap-us U] [--kernel-us K] [--copies C] [--file PATH]
#include <cuda_runtime.h>
#include <emmintrin.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_bench_support.cuh"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

void spin_us(double us) {
    const Clock::time_point start = Clock::now();
    while (us_since(start) < us) {
    }
}

// Spins on the device for about `cycles` clock cycles.
__global__ void busy_kernel(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// Streams `words` of `data` on every multiprocessor for about `cycles` (reads only; the sum is
// stored only when impossible, so the loads stay).
__global__ void stream_kernel(const uint4* data, size_t words, long long cycles, uint32_t* sink) {
    const long long start = clock64();
    uint32_t acc = 0;
    size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
    const size_t step = size_t{gridDim.x} * blockDim.x;
    while (clock64() - start < cycles) {
        const uint4 v = data[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
        i += step;
        if (i >= words) i -= words;
    }
    if (acc == 0x9E3779B9U) *sink = acc;
}

void rewrite(std::byte* record, const std::byte* source, size_t bytes, bool non_temporal) {
    if (!non_temporal) {
        std::memcpy(record, source, bytes);
        return;
    }
    auto* to = reinterpret_cast<__m128i*>(record);
    const auto* from = reinterpret_cast<const __m128i*>(source);
    for (size_t i = 0; i < bytes / sizeof(__m128i); ++i) _mm_stream_si128(to + i, from[i]);
    _mm_sfence();
}

struct Timing {
    double copy_us = 0.0;   // event to event on the copy stream
    double issue_us = 0.0;  // host issue to completion
};

}  // namespace

int main(int argc, char** argv) {
    size_t bytes = 2764800;  // one Q4 Flash record (hidden 2560, I 640, group 64)
    double gap_us = 300.0;
    double kernel_us = 50.0;
    int copies = 50;
    std::string file = "/tmp/host_copy_probe.bin";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
        if (flag == "--gap-us") gap_us = std::atof(argv[i + 1]);
        if (flag == "--kernel-us") kernel_us = std::atof(argv[i + 1]);
        if (flag == "--copies") copies = std::atoi(argv[i + 1]);
        if (flag == "--file") file = argv[i + 1];
    }
    bytes = bytes / 16 * 16;
    constexpr int kRecords = 8;
    std::byte* host = nullptr;
    CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), bytes * kRecords, cudaHostAllocDefault));
    std::vector<std::byte> source(bytes);
    for (size_t i = 0; i < bytes; ++i) source[i] = static_cast<std::byte>(i * 131 + 7);
    for (int r = 0; r < kRecords; ++r) std::memcpy(host + r * bytes, source.data(), bytes);
    std::byte* device = nullptr;
    CHECK(cudaMalloc(reinterpret_cast<void**>(&device), bytes * kRecords));
    cudaStream_t copy = nullptr;
    cudaStream_t compute = nullptr;
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    cudaEvent_t before = nullptr;
    cudaEvent_t after = nullptr;
    CHECK(cudaEventCreate(&before));
    CHECK(cudaEventCreate(&after));
    // A file of kRecords records, written and read once so that it sits in the page cache.
    const int fd = open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        std::perror(file.c_str());
        return 1;
    }
    for (int r = 0; r < kRecords; ++r) {
        if (pwrite(fd, host + r * bytes, bytes, static_cast<off_t>(r * bytes)) !=
            static_cast<ssize_t>(bytes)) {
            std::perror("pwrite");
            return 1;
        }
    }
    fsync(fd);
    void* mapping = mmap(nullptr, bytes * kRecords, PROT_READ, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
        std::perror("mmap");
        return 1;
    }
    const Clock::time_point register_start = Clock::now();
    CHECK(cudaHostRegister(mapping, bytes * kRecords,
                           cudaHostRegisterMapped | cudaHostRegisterReadOnly));
    std::printf("cudaHostRegister of the %.1f MB mapping: %.0f us (%.1f us per MB)\n",
                bytes * kRecords / 1e6, us_since(register_start),
                us_since(register_start) / (bytes * kRecords / 1e6));
    const auto* mapped = static_cast<const std::byte*>(mapping);
    constexpr size_t kLoadBytes = size_t{2} << 30;  // past the L2: every load goes to HBM
    uint4* load = nullptr;
    uint32_t* sink = nullptr;
    CHECK(cudaMalloc(reinterpret_cast<void**>(&load), kLoadBytes));
    CHECK(cudaMalloc(reinterpret_cast<void**>(&sink), sizeof(uint32_t)));
    CHECK(cudaMemset(load, 1, kLoadBytes));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    const auto kernel_cycles = static_cast<long long>(kernel_us * clock_khz / 1000.0);

    // One copy of record r, timed both ways.
    const auto timed_copy = [&](int r, const std::byte* from = nullptr, int n = 1) {
        if (from == nullptr) from = host;
        const Clock::time_point issued = Clock::now();
        CHECK(cudaEventRecord(before, copy));
        for (int k = 0; k < n; ++k) {
            const int rk = (r + k) % kRecords;
            CHECK(cudaMemcpyAsync(device + rk * bytes, from + rk * bytes, bytes,
                                  cudaMemcpyHostToDevice, copy));
        }
        CHECK(cudaEventRecord(after, copy));
        CHECK(cudaEventSynchronize(after));
        Timing t;
        t.issue_us = us_since(issued);
        float ms = 0.0F;
        CHECK(cudaEventElapsedTime(&ms, before, after));
        t.copy_us = ms * 1000.0;
        return t;
    };
    const auto report = [&](const char* name, double copy_us, double issue_us, int n = 1) {
        std::printf("%-14s copy %7.1f us (%5.1f GB/s)   issue to done %7.1f us\n", name, copy_us,
                    static_cast<double>(bytes) * n / copy_us / 1e3, issue_us);
    };

    timed_copy(0);  // warm-up
    {
        CHECK(cudaEventRecord(before, copy));
        const Clock::time_point issued = Clock::now();
        for (int i = 0; i < copies; ++i) {
            CHECK(cudaMemcpyAsync(device + (i % kRecords) * bytes, host + (i % kRecords) * bytes,
                                  bytes, cudaMemcpyHostToDevice, copy));
        }
        CHECK(cudaEventRecord(after, copy));
        CHECK(cudaEventSynchronize(after));
        float ms = 0.0F;
        CHECK(cudaEventElapsedTime(&ms, before, after));
        report("back-to-back", ms * 1000.0 / copies, us_since(issued) / copies);
    }
    {
        CHECK(cudaEventRecord(before, copy));
        const Clock::time_point issued = Clock::now();
        for (int i = 0; i < copies; ++i) {
            CHECK(cudaMemcpyAsync(device + (i % kRecords) * bytes, mapped + (i % kRecords) * bytes,
                                  bytes, cudaMemcpyHostToDevice, copy));
        }
        CHECK(cudaEventRecord(after, copy));
        CHECK(cudaEventSynchronize(after));
        float ms = 0.0F;
        CHECK(cudaEventElapsedTime(&ms, before, after));
        report("mapped-b2b", ms * 1000.0 / copies, us_since(issued) / copies);
    }
    enum class Case {
        Isolated,
        Fresh,
        FreshNonTemporal,
        BehindKernel,
        UnderLoad,
        Pread,
        Pair,
        Mapped
    };
    for (const auto& [name, which] :
         {std::pair{"isolated", Case::Isolated}, std::pair{"fresh", Case::Fresh},
          std::pair{"fresh-nt", Case::FreshNonTemporal},
          std::pair{"behind-kernel", Case::BehindKernel}, std::pair{"under-load", Case::UnderLoad},
          std::pair{"pread", Case::Pread}, std::pair{"pair", Case::Pair},
          std::pair{"mapped", Case::Mapped}}) {
        double copy_sum = 0.0;
        double issue_sum = 0.0;
        for (int i = 0; i < copies; ++i) {
            const int r = i % kRecords;
            spin_us(gap_us);
            if (which == Case::Fresh || which == Case::FreshNonTemporal) {
                // Another thread writes it, as an IO worker's pread does.
                std::thread writer(rewrite, host + r * bytes, source.data(), bytes,
                                   which == Case::FreshNonTemporal);
                writer.join();
            }
            if (which == Case::Pread) {
                std::thread reader([&] {
                    if (pread(fd, host + r * bytes, bytes, static_cast<off_t>(r * bytes)) !=
                        static_cast<ssize_t>(bytes)) {
                        std::perror("pread");
                        std::exit(1);
                    }
                });
                reader.join();
            }
            if (which == Case::BehindKernel) busy_kernel<<<1, 32, 0, compute>>>(kernel_cycles);
            if (which == Case::UnderLoad) {
                stream_kernel<<<4 * sms, 512, 0, compute>>>(load, kLoadBytes / sizeof(uint4),
                                                            kernel_cycles, sink);
            }
            const int n = which == Case::Pair ? 2 : 1;
            const Timing t = timed_copy(r, which == Case::Mapped ? mapped : nullptr, n);
            copy_sum += t.copy_us;
            issue_sum += t.issue_us;
        }
        CHECK(cudaStreamSynchronize(compute));
        report(name, copy_sum / copies, issue_sum / copies, which == Case::Pair ? 2 : 1);
    }
    CHECK(cudaHostUnregister(mapping));
    munmap(mapping, bytes * kRecords);
    close(fd);
    unlink(file.c_str());
    CHECK(cudaFree(load));
    CHECK(cudaFree(sink));
    CHECK(cudaFree(device));
    CHECK(cudaFreeHost(host));
    return 0;
}
