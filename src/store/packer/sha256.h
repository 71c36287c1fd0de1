// SHA-256 through OpenSSL's EVP interface, for the content hashes of a store's source identity.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace cherenkov::store {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(std::span<const std::byte> bytes);
    // The digest as 64 lowercase hex digits; the object cannot be updated afterwards.
    std::string hex_digest();

private:
    void* context_;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of this header
};

// SHA-256 of a whole file, read in 1 MiB blocks.
std::string sha256_of_file(const std::string& path);

}  // namespace cherenkov::store
