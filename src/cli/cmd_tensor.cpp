// strata tensor: dequantize one tensor of a GGUF file to raw float32 (for independent checks).
#include <cstdio>
#include <fstream>
#include <vector>

#include "cli/commands.h"
#include "common.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace strata::cli {

namespace {
struct TensorOptions {
  std::string model, name, out;
};

void run_tensor(const TensorOptions& o) {
  auto f = gguf::File::open(o.model);
  const gguf::TensorInfo* t = f->find_tensor(o.name);
  if (!t) throw Error("no tensor named '" + o.name + "' in " + o.model);
  if (!type_info(t->type).supported) throw Error("tensor type " + type_name(t->type) + " cannot be dequantized by this build");
  std::vector<float> row(t->ne[0]);
  std::ofstream out(o.out, std::ios::binary);
  if (!out) throw Error("cannot write " + o.out);
  const size_t rb = row_bytes(t->type, t->ne[0]);
  for (int64_t r = 0; r < t->n_rows(); ++r) {
    dequantize_row_ref(t->type, t->data + r * rb, row.data(), t->ne[0]);
    out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
  }
  if (!out) throw Error("write failed: " + o.out);
  std::fprintf(stderr, "%s: %s %s -> %s (%lld floats)\n", o.name.c_str(), type_name(t->type).c_str(), t->shape_string().c_str(),
               o.out.c_str(), static_cast<long long>(t->n_elements()));
}
}  // namespace

void add_tensor(CLI::App& app) {
  auto o = std::make_shared<TensorOptions>();
  auto* cmd = app.add_subcommand("tensor", "Write one tensor, dequantized, as raw float32 (row-major)");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("--name", o->name, "Tensor name")->required();
  cmd->add_option("-o,--output", o->out, "Output file")->required();
  cmd->callback([o] { run_tensor(*o); });
}

}  // namespace strata::cli
