#include "test_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <cstring>

namespace strata::test {

std::string shared_dir() {
  if (const char* e = std::getenv("STRATA_SHARED")) return e;
  return STRATA_SHARED_DIR;
}

std::string model_path(const std::string& name) { return shared_dir() + "/models/" + name + ".gguf"; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<float> read_f32(const std::string& path) {
  std::string b = read_file(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace strata::test
