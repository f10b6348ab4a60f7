// Google Benchmark microbenchmarks of the dot kernels, one per weight format:
//  - Dot/<format>: one 4096-wide row against quantized activations, in L1 (kernel throughput).
//  - Matvec/<format>: y = W x over a 64 MiB matrix on one thread (memory-bound decode step;
//    MV_KIB=256 for a matrix in cache, the kernel's own speed; MV_COLS sets the row width,
//    MV_TOKENS the activation rows, MV_THREADS the threads).
//  - MatvecSets/<format>: the same over packed copies of a 1 MiB matrix (MV_SET_KIB), 256 MiB in
//    all, taken in turn: each call streams a small matrix from memory, as decode does (the 64 MiB
//    matrix above partly stays in the L3 cache between calls).
//  - ReadBandwidth: strata bench's read-bandwidth measurement (GBps counter); run it beside
//    MatvecSets in one process with --benchmark_enable_random_interleaving=true, since the
//    memory's speed can change from one run to the next.
//  - Matmul/<format>: 128 activation rows through a 896 x 4864 matrix (compute-bound prefill).
//  - TokenBands/<format>: the AVX-512 prefill kernel of the decoded formats alone, in cache.
//  - AmxDecoded/<format>: the same formats' AMX prefill kernel alone (AMX hosts), in cache.
//  - Isa/<op>, Isa512/<op>: instruction throughput, eight independent chains (AVX2; AVX-512 VNNI).
//  - Attention/<shape>/<kernels>/cells:layers: one decode token's attention over an f16 KV cache
//    of a real model's heads, every layer in turn (28 layers of 2048 cells: from memory; 1 layer
//    of 512: in cache), with each SIMD table's page kernels on the f16 cells in place or on rows
//    decoded from them (same bits; ATT_THREADS sets the threads, default 1, ATT_TOKENS the
//    tokens, default 1: more is a prompt's last chunk).
//  - Argmax: greedy sampling's pick (Sampler::argmax) over a Qwen2-sized vocabulary, in cache.
// Formats with an 8-row packed kernel are packed first, as the model loader does (the lattice
// i-quants, whose packed layout is larger, only with STRATA_REPACK_IQ=1, as with `--repack-iq`);
// set STRATA_REPACK=0 to measure the file-layout kernels of every format instead.
// Run: build/bench/strata_microbench [--benchmark_filter=Q4_K]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <random>
#include <vector>

#include "backend/bandwidth.h"
#include "backend/huge_buffer.h"
#include "backend/thread_pool.h"
#include "engine/sampler.h"
#include "isa_throughput.h"
#include "kv/attention.h"
#include "ops/ops.h"
#include "quant/kernels.h"
#include "quant/quant.h"

using namespace strata;

namespace {

const GgmlType kFormats[] = {
    GgmlType::F32,    GgmlType::F16,    GgmlType::BF16,    GgmlType::Q4_0,    GgmlType::Q4_1,   GgmlType::Q5_0,
    GgmlType::Q5_1,   GgmlType::Q8_0,   GgmlType::IQ4_NL,  GgmlType::Q2_K,    GgmlType::Q3_K,   GgmlType::Q4_K,
    GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::IQ2_XXS, GgmlType::IQ2_XS,  GgmlType::IQ2_S,  GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,  GgmlType::IQ1_S,  GgmlType::IQ1_M,   GgmlType::IQ4_XS,  GgmlType::TQ1_0,  GgmlType::TQ2_0,
};

// Rows of a format: quantized random floats, or random codes with moderate scales for the
// formats without a quantizer.
std::vector<uint8_t> make_rows(GgmlType t, int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  if (can_quantize(t)) {
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : x) v = d(rng);
      quantize_row(t, x.data(), out.data() + rb * r, n);
    }
    return out;
  }
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  // Give every block a small finite fp16 scale (0x2000 ~ 0.0078) where the format keeps it first.
  const auto& ti = type_info(t);
  if (t != GgmlType::IQ1_M)
    for (size_t off = 0; off < out.size(); off += ti.type_size) out[off] = 0x00, out[off + 1] = 0x20;
  return out;
}

void BM_Dot(benchmark::State& state, GgmlType t) {
  // DOT_N sets the row length (a multiple of 256), e.g. DOT_N=1024 for the rows of a 1024-wide
  // model, where per-row costs weigh more.
  const char* dn = std::getenv("DOT_N");
  const int n = dn ? std::max(256, std::atoi(dn) / 256 * 256) : 4096;
  const KernelTable& k = kernels();
  auto w = make_rows(t, n, 1, 1);
  std::vector<float> x(n);
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  const GgmlType at = activation_type(t);
  std::vector<uint8_t> xq(at == GgmlType::F32 ? 0 : row_bytes(at, n));
  if (!xq.empty()) quantize_row(at, x.data(), xq.data(), n);
  const QDotFn dq = k.dotq[static_cast<int>(t)];
  const DotFn df = k.dot_for(t);
  for (auto _ : state) {
    float r = dq ? dq(n, w.data(), xq.data()) : df(n, w.data(), x.data());
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * n);                                 // weights/s
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));  // weight bytes/s
  state.SetLabel(std::string(k.isa) + (dq ? " int8" : " float"));
}

// The 8-row packed copy of a matrix, as the model loader makes it, in huge pages as the loader's
// (empty when not packable).
HugeBuffer pack(ops::Matrix& m) {
  if (!packable(m.type) || !kernels().gemm_x8[static_cast<int>(m.type)] || std::getenv("STRATA_REPACK")) return {};
  if (packing_grows(m.type) && !std::getenv("STRATA_REPACK_IQ")) return {};
  HugeBuffer p(packed_matrix_bytes(m.type, m.rows / 8, m.cols));
  pack_matrix8(m.type, m.data, m.row_stride, m.cols, 0, m.rows / 8, p.data());
  m.packed = p.data();
  m.packed_stride = packed_group_bytes(m.type, m.cols);
  return p;
}

// kSmall (MatvecSets): many packed copies of a small matrix (MV_SET_KIB, default 1 MiB, a 0.6B
// model's projection) taken in turn, 256 MiB in all, so each call streams its matrix from memory
// as a model's decode does, one projection after another.
template <bool kSmall>
void BM_Matvec(benchmark::State& state, GgmlType t) {
  // MV_COLS: the row width (default 4096); a 0.6B model's projections have 1024.
  const int64_t cols = std::getenv("MV_COLS") ? atoll(std::getenv("MV_COLS")) : 4096;
  // MV_KIB: the matrix size in KiB (default 64 MiB); a cache-sized matrix shows the kernel's own speed.
  const char* kib = std::getenv(kSmall ? "MV_SET_KIB" : "MV_KIB");
  const int64_t bytes = (kib ? atoll(kib) : kSmall ? 1024ll : 65536ll) << 10;
  const int64_t rows = std::max<int64_t>(64, bytes / static_cast<int64_t>(row_bytes(t, cols)));
  // 256 quantized rows repeated: the lattice formats' grid-search quantizer would take minutes
  // to fill 64 MiB, and the kernels' time does not depend on which rows repeat.
  const int64_t distinct = std::min<int64_t>(rows, 256);
  auto w = make_rows(t, cols, distinct, 3);
  const size_t block = w.size();
  w.resize(row_bytes(t, cols) * static_cast<size_t>(rows));
  for (size_t off = block; off < w.size(); off += block) std::copy_n(w.begin(), std::min(block, w.size() - off), w.begin() + off);
  ops::Matrix m{t, rows, cols, w.data(), row_bytes(t, cols)};
  const int64_t sets = kSmall ? std::max<int64_t>(1, (256ll << 20) / static_cast<int64_t>(w.size())) : 1;
  std::vector<ops::Matrix> ms(static_cast<size_t>(sets), m);
  std::vector<HugeBuffer> packed;
  for (auto& mi : ms) packed.push_back(pack(mi));
  // MV_TOKENS: activation rows per call (default 1; 2-4 as when several sessions decode together).
  const int ntok = std::getenv("MV_TOKENS") ? std::clamp(atoi(std::getenv("MV_TOKENS")), 1, 64) : 1;
  std::vector<float> x(static_cast<size_t>(cols) * ntok, 0.5f), y(static_cast<size_t>(rows) * ntok);
  // MV_THREADS: worker threads (default 1), to see how a matrix shares the memory bus.
  ThreadPool pool(std::getenv("MV_THREADS") ? std::max(1, atoi(std::getenv("MV_THREADS"))) : 1);
  size_t next = 0;
  for (auto _ : state) {
    ops::matmul(ms[next], x.data(), ntok, y.data(), pool);
    next = (next + 1) % ms.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.SetItemsProcessed(state.iterations() * rows * cols * ntok);
}

// The read bandwidth as strata bench measures it (512 MiB streamed, best of 5), with MV_THREADS
// threads: beside MatvecSets in one run (--benchmark_enable_random_interleaving), the fraction
// of the memory's speed a kernel reaches. Bytes are the GB/s reading times the iteration time.
void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(std::getenv("MV_THREADS") ? std::max(1, atoi(std::getenv("MV_THREADS"))) : 1);
  double gbps = 0;
  for (auto _ : state) gbps = measure_read_bandwidth(pool);
  state.counters["GBps"] = gbps;
}

// Load time: 64 rows of 1024 values (a 0.6B model's row width) packed 8 at a time, as the model
// loader does for every packable matrix (the lattice i-quants' grown layouts included); items are
// values packed.
void BM_Pack(benchmark::State& state, GgmlType t) {
  const int64_t cols = 1024, rows = 64;
  auto w = make_rows(t, cols, rows, 5);
  std::vector<uint8_t> p(packed_matrix_bytes(t, rows / 8, cols));
  for (auto _ : state) {
    pack_matrix8(t, w.data(), row_bytes(t, cols), cols, 0, rows / 8, p.data());
    benchmark::DoNotOptimize(p.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

// Prefill shape: a 896 x 4864 matrix (the FFN down projection of a 0.5B model) times 128
// activation rows on one thread; items are multiply-adds, so items/s is the GEMM's MAC rate.
void BM_Matmul(benchmark::State& state, GgmlType t) {
  const int64_t cols = std::getenv("MM_COLS") ? atoi(std::getenv("MM_COLS")) : 4864, rows = 896 * 4864 / cols;
  const int ntok = 128;
  auto w = make_rows(t, cols, rows, 4);
  ops::Matrix m{t, rows, cols, w.data(), row_bytes(t, cols)};
  auto packed = pack(m);
  std::vector<float> x(static_cast<size_t>(cols) * ntok), y(static_cast<size_t>(rows) * ntok);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  ThreadPool pool(1);
  for (auto _ : state) {
    ops::matmul(m, x.data(), ntok, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols * ntok);
}

// The prefill kernel of the decoded formats alone (gemm_decoded_bands, AVX-512 VNNI): 8 decoded
// rows of 1024 values (TB_COLS) times 64 tokens, all in cache; items are multiply-adds.
void BM_TokenBands(benchmark::State& state, GgmlType t) {
  const KernelTable& k = kernels();
  const int ti = static_cast<int>(t);
  const int cols = std::getenv("TB_COLS") ? std::max(256, atoi(std::getenv("TB_COLS")) / 256 * 256) : 1024;
  const int ntok = kBandTokens * kMaxBandsPerCall;
  auto w = make_rows(t, cols, 8, 6);
  std::vector<uint8_t> decoded(cols / 256 * kDecodedX8BlockBytes);
  if (k.decode_rows8[ti]) {
    k.decode_rows8[ti](cols, w.data(), row_bytes(t, cols), 8, decoded.data());
  } else {
    std::vector<uint8_t> packed(packed_group_bytes(t, cols));
    pack_rows8(t, w.data(), row_bytes(t, cols), cols, packed.data());
    k.decode_packed8[ti](cols, packed.data(), decoded.data());
  }
  std::vector<float> x(static_cast<size_t>(cols) * ntok), y(8 * ntok);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  const size_t xrow = row_bytes(GgmlType::Q8_K, cols);
  std::vector<uint8_t> xq(xrow * ntok), bands(token_band_bytes(cols) * kMaxBandsPerCall);
  for (int i = 0; i < ntok; ++i) quantize_row(GgmlType::Q8_K, x.data() + i * cols, xq.data() + i * xrow, cols);
  prepare_token_bands(cols, xq.data(), xrow, ntok, bands.data());
  for (auto _ : state) {
    k.gemm_decoded_bands[ti](cols, decoded.data(), bands.data(), token_band_bytes(cols), ntok, 8, y.data(), 8);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * 8 * cols * ntok);
}

// The AMX prefill kernel of the decoded formats alone (gemm_amx_decoded, staging included): 16
// decoded rows of 1024 values (TB_COLS) times 64 tokens (two passes of 32), in cache; items are
// multiply-adds, so it compares with TokenBands/<format> (8 rows) per item.
void BM_AmxDecoded(benchmark::State& state, GgmlType t) {
  const KernelTable& k = kernels();
  const int ti = static_cast<int>(t);
  const int cols = std::getenv("TB_COLS") ? std::max(256, atoi(std::getenv("TB_COLS")) / 256 * 256) : 1024;
  const int ntok = 64;
  auto w = make_rows(t, cols, 16, 8);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> dec0(cols / 256 * kDecodedX8BlockBytes), dec1(dec0.size());
  for (int g = 0; g < 2; ++g) {
    uint8_t* out = g ? dec1.data() : dec0.data();
    if (k.decode_rows8[ti]) {
      k.decode_rows8[ti](cols, w.data() + 8 * g * rb, rb, 8, out);
    } else {
      std::vector<uint8_t> packed(packed_group_bytes(t, cols));
      pack_rows8(t, w.data() + 8 * g * rb, rb, cols, packed.data());
      k.decode_packed8[ti](cols, packed.data(), out);
    }
  }
  std::vector<float> x(static_cast<size_t>(cols) * ntok), y(16 * ntok);
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  const size_t xrow = row_bytes(GgmlType::Q8_K, cols);
  std::vector<uint8_t> xq(xrow * ntok);
  for (int i = 0; i < ntok; ++i) quantize_row(GgmlType::Q8_K, x.data() + i * cols, xq.data() + i * xrow, cols);
  for (auto _ : state) {
    k.gemm_amx_decoded[ti](cols, dec0.data(), dec1.data(), 16, xq.data(), xrow, ntok, y.data(), 16);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * 16 * cols * ntok);
}

// Heads of the models the benches and tests run: KV heads, head size, query heads.
struct AttnShape {
  const char* name;
  int n_kv, dim, n_head;
};
// "contig": Qwen3-0.6B's cells of one KV head as if they were one contiguous run (8x the cells),
// the bound for how a page's layout is read.
const AttnShape kAttnShapes[] = {{"qwen3-0.6b", 8, 128, 16}, {"qwen2-0.5b", 2, 64, 14}, {"gemma3-270m", 1, 256, 4}, {"contig", 1, 128, 2}};

// A table's attention kernels: in place on f16 cells (`in_place`, the table's own where it has
// them, else `donor`'s) or on decoded rows.
struct AttnKernels {
  KernelTable table;
  bool usable = false;
};
AttnKernels attn_kernels(const KernelTable* base, bool in_place, const KernelTable* donor = nullptr) {
  AttnKernels a;
  if (!base) return a;
  a.table = *base;
  if (donor) a.table.attn_scores_f16 = donor->attn_scores_f16, a.table.attn_values_f16 = donor->attn_values_f16;
  if (!in_place) a.table.attn_scores_f16 = nullptr, a.table.attn_values_f16 = nullptr;
  a.usable = !in_place || (a.table.attn_scores_f16 && a.table.attn_values_f16);
  return a;
}

// The KV store of the last shape asked for (the kernels of one shape and size run one after
// another): filling 28 layers of 2048 cells takes seconds.
const kv::KvStore& attn_store(const AttnShape& sh, int cells, int layers, kv::SeqId& seq) {
  static std::unique_ptr<kv::KvStore> store;
  static std::string key;
  static kv::SeqId s = 0;
  const std::string want = std::string(sh.name) + "/" + std::to_string(cells) + "/" + std::to_string(layers);
  seq = s;
  if (store && key == want) return *store;
  store.reset();
  kv::Config c;
  c.n_layers = layers, c.n_kv_heads = sh.n_kv, c.head_dim_k = c.head_dim_v = sh.dim, c.max_cells = cells;
  c.format = kv::Format::F16;
  store = std::make_unique<kv::KvStore>(c);
  seq = s = store->new_sequence();
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  const int chunk = 256, width = sh.n_kv * sh.dim;
  std::vector<float> kx(static_cast<size_t>(chunk) * width), vx(kx.size());
  for (int l = 0; l < layers; ++l)
    for (int p = 0; p < cells; p += chunk) {
      const int n = std::min(chunk, cells - p);
      for (auto& x : kx) x = d(rng);
      for (auto& x : vx) x = d(rng);
      store->append(s, l, p, n, kx.data(), vx.data());
    }
  key = want;
  return *store;
}

void BM_Attention(benchmark::State& state, AttnShape sh, AttnKernels k) {
  if (!k.usable) {
    state.SkipWithError("this CPU has no such kernels");
    return;
  }
  const int cells = static_cast<int>(state.range(0)), layers = static_cast<int>(state.range(1));
  const int n_tok = std::getenv("ATT_TOKENS") ? std::clamp(atoi(std::getenv("ATT_TOKENS")), 1, cells) : 1;
  kv::SeqId s = 0;
  const kv::KvStore& store = attn_store(sh, cells, layers, s);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> q(static_cast<size_t>(n_tok) * sh.n_head * sh.dim), out(q.size());
  for (auto& x : q) x = d(rng);
  kv::AttentionParams ap;
  ap.n_head = sh.n_head, ap.scale = 1.f / std::sqrt(static_cast<float>(sh.dim)), ap.kernels = &k.table;
  ThreadPool pool(std::getenv("ATT_THREADS") ? std::max(1, atoi(std::getenv("ATT_THREADS"))) : 1);
  for (auto _ : state) {
    for (int l = 0; l < layers; ++l) kv::attend(store, s, l, cells - n_tok, n_tok, q.data(), ap, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
  // Items: cells read per KV head, every layer.
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(cells) * layers * sh.n_kv);
}

// One of isa_throughput.cpp's loops: items are operations (or sequences).
void BM_Argmax(benchmark::State& state) {
  constexpr int kVocab = 151936;
  std::vector<float> logits(kVocab);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (float& x : logits) x = normal(rng);
  for (auto _ : state) benchmark::DoNotOptimize(engine::Sampler::argmax(logits.data(), kVocab));
  state.SetItemsProcessed(state.iterations() * kVocab);
}
BENCHMARK(BM_Argmax)->Name("Argmax")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReadBandwidth)->Name("ReadBandwidth")->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_IsaChain(benchmark::State& state, void (*run)(long)) {
  constexpr long kSteps = 1024;
  for (auto _ : state) run(kSteps);
  state.SetItemsProcessed(state.iterations() * kSteps * 8);
}

const bool kRegistered = [] {
  if (avx2_kernels()) {  // AVX2, FMA and F16C (F16C from CPUID: Clang's __builtin_cpu_supports lacks it)
    int n = 0;
    const IsaChain* chains = isa_chains(&n);
    for (int i = 0; i < n; ++i) benchmark::RegisterBenchmark(chains[i].name, BM_IsaChain, chains[i].run);
  }
  if (avx512_kernels()) {
    int n = 0;
    const IsaChain* chains = isa_chains_avx512vnni(&n);
    for (int i = 0; i < n; ++i) benchmark::RegisterBenchmark(chains[i].name, BM_IsaChain, chains[i].run);
  }
  const struct {
    const char* name;
    AttnKernels k;
  } attn[] = {
      {"avx2-rows", attn_kernels(avx2_kernels(), false)},
      {"avx2-f16", attn_kernels(avx2_kernels(), true)},
      {"avx512-rows", attn_kernels(avx512_kernels(), false)},
      {"avx512-f16", attn_kernels(avx512_kernels(), true)},
      {"avx512-avx2f16", attn_kernels(avx512_kernels(), true, avx2_kernels())},
  };
  for (const AttnShape& sh : kAttnShapes)
    for (const std::vector<int64_t>& size : std::string(sh.name) == "contig"
                                                 ? std::vector<std::vector<int64_t>>{{16384, 28}}
                                                 : std::vector<std::vector<int64_t>>{{512, 1}, {2048, 28}})
      for (const auto& a : attn)
        benchmark::RegisterBenchmark((std::string("Attention/") + sh.name + "/" + a.name).c_str(), BM_Attention, sh, a.k)
            ->Args(size)
            ->Unit(benchmark::kMicrosecond);
  for (GgmlType t : kFormats) {
    benchmark::RegisterBenchmark(("Dot/" + type_name(t)).c_str(), BM_Dot, t);
    benchmark::RegisterBenchmark(("Matvec/" + type_name(t)).c_str(), BM_Matvec<false>, t)->Unit(benchmark::kMillisecond);
    if (packable(t)) benchmark::RegisterBenchmark(("MatvecSets/" + type_name(t)).c_str(), BM_Matvec<true>, t)->Unit(benchmark::kMillisecond);
    if (type_info(t).block_size == 32 || type_info(t).block_size == 256 || t == GgmlType::F16)
      benchmark::RegisterBenchmark(("Matmul/" + type_name(t)).c_str(), BM_Matmul, t)->Unit(benchmark::kMillisecond);
    const int ti = static_cast<int>(t);
    if (packable(t)) benchmark::RegisterBenchmark(("Pack/" + type_name(t)).c_str(), BM_Pack, t)->Unit(benchmark::kMicrosecond);
    if (kernels().gemm_decoded_bands[ti] && (kernels().decode_rows8[ti] || kernels().decode_packed8[ti]))
      benchmark::RegisterBenchmark(("TokenBands/" + type_name(t)).c_str(), BM_TokenBands, t);
    if (kernels().gemm_amx_decoded[ti] && (kernels().decode_rows8[ti] || kernels().decode_packed8[ti]))
      benchmark::RegisterBenchmark(("AmxDecoded/" + type_name(t)).c_str(), BM_AmxDecoded, t);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
