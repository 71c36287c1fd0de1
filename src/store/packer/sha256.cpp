#include "store/packer/sha256.h"

#include <openssl/evp.h>

#include <vector>

#include "base/error.h"
#include "base/file.h"

namespace cherenkov::store {

namespace {

EVP_MD_CTX* context_of(void* context) {
    return static_cast<EVP_MD_CTX*>(context);
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
    if (context_ == nullptr ||
        EVP_DigestInit_ex(context_of(context_), EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(context_of(context_));
        throw_internal("sha256: OpenSSL could not initialise a digest");
    }
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(context_of(context_));
}

void Sha256::update(std::span<const std::byte> bytes) {
    if (EVP_DigestUpdate(context_of(context_), bytes.data(), bytes.size()) != 1) {
        throw_internal("sha256: digest update failed");
    }
}

std::string Sha256::hex_digest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(context_of(context_), digest, &length) != 1) {
        throw_internal("sha256: digest final failed");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string text;
    text.reserve(2 * static_cast<size_t>(length));
    for (unsigned int index = 0; index < length; ++index) {
        text.push_back(kHex[digest[index] >> 4]);
        text.push_back(kHex[digest[index] & 0x0F]);
    }
    return text;
}

std::string sha256_of_file(const std::string& path) {
    const UniqueFd fd = open_read_only(path);
    const uint64_t size = file_size(fd.get(), path);
    Sha256 hash;
    std::vector<std::byte> block(std::min<uint64_t>(size, uint64_t{1} << 20));
    for (uint64_t offset = 0; offset < size; offset += block.size()) {
        const auto n = static_cast<size_t>(std::min<uint64_t>(block.size(), size - offset));
        pread_exact(fd.get(), std::span(block).first(n), offset, path);
        hash.update(std::span(block).first(n));
    }
    return hash.hex_digest();
}

}  // namespace cherenkov::store
