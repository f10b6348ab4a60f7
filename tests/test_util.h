// Helpers shared by the tests: locating ../shared, reading files, oracle JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace strata::test {

std::string shared_dir();                    // STRATA_SHARED env var, else the build-time path
std::string model_path(const std::string& name);  // shared/models/<name>.gguf
std::string read_file(const std::string& path);
std::vector<float> read_f32(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace strata::test
