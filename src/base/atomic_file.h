// Publishing files atomically: write a temporary file beside the destination, fsync it,
// rename it over the destination, fsync the directory. A crash at any point leaves either
// the old file or the new one, never a torn mix.
#pragma once

#include <string>
#include <string_view>

namespace cherenkov {

void write_file_atomically(const std::string& path, std::string_view contents);

// fsyncs the directory holding `path` so that a rename into it is durable.
void sync_parent_directory(const std::string& path);

}  // namespace cherenkov
