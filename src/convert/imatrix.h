// Importance matrices: for each weight matrix, the sum over calibration text of the square of
// each input column's activation, and how many activation rows went in. Their ratio (the mean
// square activation per column) tells the lattice i-quant quantizers which columns' errors cost
// most (quantize_iq.cpp). The file format is llama.cpp's: a GGUF with tensors
// "<weight>.in_sum2" (f32, one per column) and "<weight>.counts" (f32, one value) and metadata
// imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size. Its older binary format
// ("imatrix.dat") is read too.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace strata::convert {

struct ImatrixEntry {
  std::vector<double> sum2;  // per input column
  double count = 0;          // activation rows summed
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0, chunk_size = 0;

  // Mean square activation of each of the weight's cols input columns; empty when the weight has
  // no entry or a zero count. Throws when the entry's width is not cols.
  std::vector<float> importance(const std::string& weight, int64_t cols) const;
};

// Reads either format; throws naming the file and what is wrong with it.
Imatrix load_imatrix(const std::string& path);
Imatrix parse_imatrix(std::vector<uint8_t> bytes, const std::string& name);  // the same from memory (fuzzing)
void save_imatrix(const Imatrix& m, const std::string& path);  // GGUF

// strata imatrix: runs the model over the text in chunks of chunk_size tokens (each from an empty
// context) and sums the inputs of every blk.* weight matrix (not the output matrix, which
// llama.cpp's collector also leaves out by default).
struct ImatrixOptions {
  std::string model, text_file;
  int chunk_size = 512, max_chunks = 0, n_threads = 0;
  // Also the output matrix (output.weight, or token_embd.weight when tied): every token's logits
  // are then computed, as llama.cpp's --process-output does.
  bool process_output = false;
};
Imatrix collect_imatrix(const ImatrixOptions& o, std::FILE* log);

}  // namespace strata::convert
