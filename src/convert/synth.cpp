// Random-weight models with the shapes of real ones, so benchmarks can be re-created anywhere.
#include <cmath>
#include <cstring>

#include "backend/thread_pool.h"
#include "common.h"
#include "convert/convert.h"
#include "gguf/gguf.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/quantize_iq.h"

namespace strata::convert {

const std::vector<ArchPreset>& synth_presets() {
  // Shapes from the models' published configurations.
  static const std::vector<ArchPreset> kPresets = {
      {"qwen2", "0.5b", "Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 1e6f, 1e-6f, 32768, true, false},
      {"qwen2", "1.5b", "Qwen2.5-1.5B", 1536, 28, 12, 2, 128, 8960, 1e6f, 1e-6f, 32768, true, false},
      {"qwen3", "0.6b", "Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, 1e6f, 1e-6f, 40960, false, true},
      {"qwen3", "1.7b", "Qwen3-1.7B", 2048, 28, 16, 8, 128, 6144, 1e6f, 1e-6f, 40960, false, true},
      {"llama", "1b", "Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 5e5f, 1e-5f, 131072, false, false},
      // Small shapes for tests.
      {"qwen2", "tiny", "a small test", 256, 2, 4, 2, 64, 512, 1e6f, 1e-6f, 4096, true, false},
      {"qwen3", "tiny", "a small test", 256, 2, 4, 2, 64, 512, 1e6f, 1e-6f, 4096, false, true},
      {"llama", "tiny", "a small test", 256, 2, 4, 2, 64, 512, 1e4f, 1e-5f, 4096, false, false},
  };
  return kPresets;
}

namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t hash_name(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
// Approximately normal with mean `mean` and standard deviation `sd`: a scaled sum of four
// uniforms (Irwin-Hall), cheap and bounded.
struct RowRng {
  uint64_t state;
  float next(float mean, float sd) {
    uint64_t a = splitmix64(state), b = splitmix64(state);
    float u = static_cast<float>(a & 0xFFFFFFFF) + static_cast<float>(a >> 32) +
              static_cast<float>(b & 0xFFFFFFFF) + static_cast<float>(b >> 32);
    u = u / 4294967296.0f - 2.0f;  // sum of 4 U(0,1) minus its mean: variance 1/3
    return mean + sd * 1.7320508f * u;
  }
};

// A block of random codes of a lattice i-quant (their grid-search quantizer would take minutes for
// a whole model): random bytes, then the fp16 block scale set so the values have standard
// deviation sd.
void set_block_scale(GgmlType t, uint8_t* block, uint16_t h) {
  if (t == GgmlType::IQ1_M) {  // the scale's four nibbles sit on top of the four scale words
    for (int k = 0; k < 4; ++k) {
      uint16_t w;
      std::memcpy(&w, block + 48 + 2 * k, 2);
      w = static_cast<uint16_t>((w & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
      std::memcpy(block + 48 + 2 * k, &w, 2);
    }
  } else {
    std::memcpy(block, &h, 2);  // every other lattice format starts with its fp16 scale
  }
}
void random_codes_row(GgmlType t, RowRng& rng, float sd, uint8_t* dst, int64_t n) {
  const auto& ti = type_info(t);
  float vals[256];
  for (int64_t b = 0; b < n / ti.block_size; ++b) {
    uint8_t* block = dst + b * ti.type_size;
    for (size_t i = 0; i < ti.type_size; ++i) block[i] = static_cast<uint8_t>(splitmix64(rng.state));
    set_block_scale(t, block, fp32_to_fp16(1.0f));
    dequantize_row_ref(t, block, vals, ti.block_size);
    double ss = 0;
    for (int i = 0; i < ti.block_size; ++i) ss += static_cast<double>(vals[i]) * vals[i];
    const double rms = std::sqrt(ss / ti.block_size);
    set_block_scale(t, block, fp32_to_fp16(rms > 0 ? static_cast<float>(sd / rms) : 0.0f));
  }
}

const ArchPreset& find_preset(const std::string& arch, const std::string& preset) {
  std::string names;
  for (auto& p : synth_presets()) {
    if (p.arch == arch && p.preset == preset) return p;
    names += (names.empty() ? "" : ", ") + p.arch + " " + p.preset;
  }
  throw Error("no synth preset '" + arch + " " + preset + "' (available: " + names + ")");
}
}  // namespace

ConvertReport synth_model(const SynthOptions& o, const std::string& out_path, std::FILE* log) {
  const ArchPreset& p = find_preset(o.arch, o.preset);
  const FileType& ft = file_type_by_name(o.type);
  if (o.vocab_from.empty()) throw Error("synth needs --vocab-from FILE.gguf (the tokenizer to copy)");
  auto vocab = gguf::File::open(o.vocab_from);
  const auto tokens = vocab->get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw Error(o.vocab_from + " has no tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(tokens.size());
  const int n_layer = o.layers > 0 ? o.layers : p.n_layer;
  const int64_t E = p.n_embd, QD = int64_t{p.n_head} * p.head_dim, KD = int64_t{p.n_head_kv} * p.head_dim;

  gguf::Writer w;
  const std::string a = p.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "synthetic " + p.like + " shape, seed " + std::to_string(o.seed));
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", ft.gguf_file_type);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(p.n_ctx_train));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(E));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(p.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(p.head_dim));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(p.head_dim));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(p.head_dim));
  w.set_f32(a + ".rope.freq_base", p.rope_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);
  w.copy_metadata(*vocab, "tokenizer.");

  ThreadPool pool(o.n_threads > 0 ? o.n_threads : ThreadPool::default_threads());
  ConvertReport report;
  // Every row has its own generator seeded from (seed, tensor name, row): the file is the same
  // for a seed whatever the thread count.
  auto add = [&](const std::string& name, std::vector<int64_t> dims, float mean, float sd) {
    const uint64_t key = hash_name(name) ^ (o.seed * 0xD1B54A32D192ED03ull);
    int64_t rows = 1;
    for (size_t d = 1; d < dims.size(); ++d) rows *= dims[d];
    const GgmlType type = choose_type(ft, {name, dims}, n_layer, /*output_tied=*/true);
    std::vector<uint8_t> bytes;
    if (!is_lattice_iquant(type)) {
      bytes = encode_rows(pool, type, dims[0], rows, [&](int64_t r, float* row) {
        RowRng rng{key + static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull};
        for (int64_t i = 0; i < dims[0]; ++i) row[i] = rng.next(mean, sd);
      });
    } else {
      const size_t rb = row_bytes(type, dims[0]);
      bytes.resize(rb * static_cast<size_t>(rows));
      pool.parallel_for(rows, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          RowRng rng{key + static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull};
          random_codes_row(type, rng, sd, bytes.data() + rb * static_cast<size_t>(r), dims[0]);
        }
      });
    }
    report.add(type, dims[0] * rows, bytes.size());
    w.add_tensor(name, std::move(dims), type, std::move(bytes));
  };
  // Scales: projections 1/sqrt(fan_in) keep activations near unit size through the layers; the
  // (tied) embedding gives logits a spread of about 3, so the output distribution has a clear top.
  auto proj_sd = [](int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); };
  // Projections back into the residual stream are scaled down by sqrt(2 x layers), as in GPT-2's
  // initialisation, so the stream stays dominated by the embedding like a trained model's.
  const float out_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(n_layer));
  add("token_embd.weight", {E, n_vocab}, 0.0f, 3.0f / std::sqrt(static_cast<float>(E)));
  for (int il = 0; il < n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(b + "attn_norm.weight", {E}, 1.0f, 0.05f);
    add(b + "attn_q.weight", {E, QD}, 0.0f, proj_sd(E));
    add(b + "attn_k.weight", {E, KD}, 0.0f, proj_sd(E));
    add(b + "attn_v.weight", {E, KD}, 0.0f, proj_sd(E));
    if (p.qkv_bias) {
      add(b + "attn_q.bias", {QD}, 0.0f, 0.1f);
      add(b + "attn_k.bias", {KD}, 0.0f, 0.1f);
      add(b + "attn_v.bias", {KD}, 0.0f, 0.1f);
    }
    if (p.qk_norm) {
      add(b + "attn_q_norm.weight", {p.head_dim}, 1.0f, 0.05f);
      add(b + "attn_k_norm.weight", {p.head_dim}, 1.0f, 0.05f);
    }
    add(b + "attn_output.weight", {QD, E}, 0.0f, out_scale * proj_sd(QD));
    add(b + "ffn_norm.weight", {E}, 1.0f, 0.05f);
    add(b + "ffn_gate.weight", {E, p.n_ff}, 0.0f, proj_sd(E));
    add(b + "ffn_up.weight", {E, p.n_ff}, 0.0f, proj_sd(E));
    add(b + "ffn_down.weight", {p.n_ff, E}, 0.0f, out_scale * proj_sd(p.n_ff));
  }
  add("output_norm.weight", {E}, 1.0f, 0.05f);
  if (log) {
    std::fprintf(log, "synth: %s %s shaped like %s, %d layers, vocab %lld from %s, %s, seed %llu\n", p.arch.c_str(),
                 p.preset.c_str(), p.like.c_str(), n_layer, static_cast<long long>(n_vocab), o.vocab_from.c_str(),
                 ft.name.c_str(), static_cast<unsigned long long>(o.seed));
  }
  w.write(out_path);
  return report;
}

}  // namespace strata::convert
