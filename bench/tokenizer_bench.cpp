// Tokenizer throughput: `tokenizer_bench MODEL_DIR TEXT_FILE [N_REPEATS]` encodes the whole file
// in one call and in 4 KiB chunks, decodes the ids in one call and through the streaming
// detokenizer, and prints MB/s of input text (best of N_REPEATS, single thread). Times are the
// thread's CPU time, so a machine shared with other work still gives comparable figures.
// bench/tokenizer_hf_bench.py measures Hugging Face tokenizers on the same file for the ratio.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "text/tokenizer/streaming_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace {

double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double best_seconds(int n_repeats, const std::function<void()>& work) {
    double best = 1e30;
    for (int repeat = 0; repeat < n_repeats; ++repeat) {
        const double start = thread_cpu_seconds();
        work();
        best = std::min(best, thread_cpu_seconds() - start);
    }
    return best;
}

void report(const char* what, size_t n_bytes, double seconds) {
    std::printf("%-28s %8.2f MB/s  (%.3f s)\n", what, static_cast<double>(n_bytes) / 1e6 / seconds,
                seconds);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL_DIR TEXT_FILE [N_REPEATS]\n", argv[0]);
        return 2;
    }
    try {
        const int n_repeats = argc > 3 ? std::atoi(argv[3]) : 3;
        const double load_start = thread_cpu_seconds();
        const auto tokenizer = cherenkov::text::Tokenizer::load_directory(argv[1]);
        std::printf("load                         %.3f s\n", thread_cpu_seconds() - load_start);
        const std::string text = cherenkov::read_text_file(argv[2]);
        std::printf("text                         %zu bytes\n", text.size());

        std::vector<int32_t> ids;
        report("encode (one call)", text.size(),
               best_seconds(n_repeats, [&] { ids = tokenizer.encode(text); }));
        std::printf("tokens                       %zu (%.2f bytes/token)\n", ids.size(),
                    static_cast<double>(text.size()) / static_cast<double>(ids.size()));

        size_t n_chunk_ids = 0;
        report("encode (4 KiB chunks)", text.size(), best_seconds(n_repeats, [&] {
                   n_chunk_ids = 0;
                   size_t offset = 0;
                   while (offset < text.size()) {
                       size_t end = std::min(text.size(), offset + 4096);
                       // Cut at a character boundary.
                       while (end < text.size() &&
                              (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
                           ++end;
                       n_chunk_ids +=
                           tokenizer.encode(std::string_view(text).substr(offset, end - offset))
                               .size();
                       offset = end;
                   }
               }));

        std::string decoded;
        report("decode (one call)", text.size(),
               best_seconds(n_repeats, [&] { decoded = tokenizer.decode(ids); }));
        std::printf("round trip                   %s\n",
                    decoded == text ? "identical" : "differs (text not NFC)");

        size_t n_streamed = 0;
        report("decode (streaming)", text.size(), best_seconds(n_repeats, [&] {
                   cherenkov::text::StreamingDetokenizer stream(tokenizer);
                   n_streamed = 0;
                   for (const int32_t id : ids) n_streamed += stream.push(id).size();
                   n_streamed += stream.finish().size();
               }));
        return n_streamed == decoded.size() ? 0 : 1;
    } catch (const cherenkov::Error& e) {
        std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
        return 1;
    }
}
