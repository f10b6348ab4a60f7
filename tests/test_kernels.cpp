// Kernel tests: every format's SIMD dot against the scalar reference on random blocks, and
// quantize -> dequantize round-trip error bounds.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "backend/thread_pool.h"
#include "ops/ops.h"
#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/quant.h"

using namespace strata;

namespace {

const GgmlType kFormats[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                             GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::Q2_K,
                             GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                             GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                             GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ4_XS,
                             GgmlType::TQ1_0, GgmlType::TQ2_0};

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Random bytes are valid blocks for every format except for NaN/inf scales: quantizing random
// floats gives realistic blocks, raw random bytes exercise every code path of the bit layout.
std::vector<uint8_t> random_row(GgmlType t, int n, uint32_t seed, bool raw) {
  std::vector<uint8_t> row(row_bytes(t, n));
  // Formats without a quantizer (the lattice i-quants) are always drawn as raw bytes.
  if (!can_quantize(t)) raw = true;
  if (raw && t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16) {
    std::mt19937 rng(seed);
    // Redraw until the fp16 scales decode to moderate values, so sums stay finite.
    for (int attempt = 0; attempt < 10000; ++attempt) {
      for (auto& b : row) b = static_cast<uint8_t>(rng());
      std::vector<float> ref(n);
      dequantize_row_ref(t, row.data(), ref.data(), n);
      bool finite = true;
      for (float x : ref) finite &= std::isfinite(x) && std::fabs(x) < 1e6f;
      if (finite) return row;
    }
  }
  auto x = randn(n, seed);
  quantize_row(t, x.data(), row.data(), n);
  return row;
}

class KernelParity : public ::testing::TestWithParam<GgmlType> {};

TEST_P(KernelParity, SimdDotMatchesScalarReference) {
  const KernelTable* simd = avx2_kernels();
  if (!simd) GTEST_SKIP() << "CPU has no AVX2";
  const GgmlType t = GetParam();
  const int bs = type_info(t).block_size == 1 ? 32 : type_info(t).block_size;
  for (int blocks : {1, 2, 3, 7}) {
    for (int trial = 0; trial < 20; ++trial) {
      int n = blocks * bs + (bs == 1 ? trial % 7 : 0);
      auto row = random_row(t, n, 1000 * blocks + trial, trial % 2 == 0);
      auto x = randn(n, 77 + trial);
      float ref = dot_row_ref(t, n, row.data(), x.data());
      // Bound from float rounding: n * eps * sum |w_i x_i|.
      std::vector<float> w(n);
      dequantize_row_ref(t, row.data(), w.data(), n);
      double mag = 0;
      for (int i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(w[i]) * x[i]);
      double tol = 4.0 * n * 1.19e-7 * mag + 1e-6;
      EXPECT_NEAR(simd->dot_for(t)(n, row.data(), x.data()), ref, tol) << type_name(t) << " n=" << n;
      EXPECT_NEAR(scalar_kernels().dot_for(t)(n, row.data(), x.data()), ref, tol) << type_name(t) << " n=" << n;
      std::vector<float> deq(n);
      simd->dequant_for(t)(row.data(), deq.data(), n);
      EXPECT_EQ(0, std::memcmp(deq.data(), w.data(), n * sizeof(float))) << type_name(t);
    }
  }
}

// Formats with AVX2 integer kernels on quantized activations (the others multiply in float).
const GgmlType kIntFormats[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                                GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ4_XS,
                                GgmlType::TQ1_0, GgmlType::TQ2_0};

class IntKernelParity : public ::testing::TestWithParam<GgmlType> {};

// Every SIMD table this CPU can run (AVX2, and AVX-512 VNNI where present).
std::vector<const KernelTable*> simd_tables() {
  std::vector<const KernelTable*> v;
  for (const KernelTable* k : {avx2_kernels(), avx512_kernels(), avx512_bitalg_kernels(), amx_kernels()})
    if (k) v.push_back(k);
  return v;
}

TEST_P(IntKernelParity, IntegerDotOnQuantizedActivationsMatchesReference) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (const KernelTable* simd : simd_tables()) {
  SCOPED_TRACE(simd->isa);
  const GgmlType t = GetParam();
  const QDotFn dq = simd->dotq[static_cast<int>(t)];
  ASSERT_NE(dq, nullptr) << type_name(t) << " lost its integer kernel";
  const GgmlType at = activation_type(t);
  const int bs = type_info(at).block_size;
  for (int blocks : {1, 2, 5, 8}) {
    for (int trial = 0; trial < 20; ++trial) {
      int n = blocks * std::max(bs, type_info(t).block_size);
      auto row = random_row(t, n, 500 * blocks + trial, trial % 2 == 0);
      auto x = randn(n, 91 + trial, trial % 3 ? 1.f : 50.f);
      std::vector<uint8_t> xq(row_bytes(at, n));
      quantize_row(at, x.data(), xq.data(), n);
      std::vector<float> xd(n), w(n);
      dequantize_row_ref(at, xq.data(), xd.data(), n);
      dequantize_row_ref(t, row.data(), w.data(), n);
      double mag = 0;
      for (int i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(w[i]) * xd[i]);
      EXPECT_NEAR(dq(n, row.data(), xq.data()), dot_row_ref(t, n, row.data(), xd.data()), 4.0 * n * 1.19e-7 * mag + 1e-6)
          << type_name(t) << " n=" << n;
    }
  }
  }
}

// Several activation rows per weight row must give exactly the single-row results.
TEST_P(IntKernelParity, MultiRowKernelIsBitIdenticalToSingleRow) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (const KernelTable* simd : simd_tables()) {
  SCOPED_TRACE(simd->isa);
  const GgmlType t = GetParam();
  const QDotMultiFn dm = simd->dotq_multi[static_cast<int>(t)];
  if (!dm) continue;  // this format has no multi-row kernel; matmul uses the single-row one
  const GgmlType at = activation_type(t);
  const int n = type_info(at).block_size == 32 ? 288 : 256;  // 9 blocks: covers an odd last block
  const size_t stride = row_bytes(at, n);
  auto row = random_row(t, n, 42, false);
  std::vector<uint8_t> xq(stride * 4);
  for (int r = 0; r < 4; ++r) {
    auto x = randn(n, 100 + r);
    quantize_row(at, x.data(), xq.data() + r * stride, n);
  }
  for (int ntok = 1; ntok <= 4; ++ntok) {
    float out[4];
    dm(n, row.data(), xq.data(), stride, ntok, out);
    for (int r = 0; r < ntok; ++r) {
      float single = simd->dotq[static_cast<int>(t)](n, row.data(), xq.data() + r * stride);
      EXPECT_EQ(0, std::memcmp(&out[r], &single, 4)) << type_name(t) << " ntok " << ntok << " row " << r;
    }
  }
}
}

// Decode takes several weight rows per call where the format has such a kernel: every row's
// output has the bits of the single-row kernel, for every row count (pairs and an odd last row).
TEST_P(IntKernelParity, WeightRowsKernelIsBitIdenticalToSingleRow) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  const GgmlType t = GetParam();
  for (const KernelTable* simd : simd_tables()) {
    SCOPED_TRACE(simd->isa);
    const QDotRowsFn drows = simd->dotq_rows[static_cast<int>(t)];
    if (!drows) continue;  // matmul uses the single-row kernel for this format
    const GgmlType at = activation_type(t);
    // 3 blocks of 256 per row, and 13 (the AVX-512 grid kernels sum 8 / rows-per-call blocks per
    // tree, then one by one), and 65 (past the 64 blocks whose IQ1 offset sums are made once per call);
    // raw rows only where their random scales stay finite.
    for (const int n : {768, 3328, 16640}) {
      const size_t rb = row_bytes(t, n);
      std::vector<uint8_t> rows;
      constexpr int kRows = 15;  // calls of 4, 2 and 1 rows (the AVX-512 IQ1 kernels) in every mix
      for (int r = 0; r < kRows; ++r) {
        auto row = random_row(t, n, 70 + r, r % 2 == 1 && n < 4096);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      auto x = randn(n, 7, 20.f);
      std::vector<uint8_t> xq(row_bytes(at, n));
      quantize_row(at, x.data(), xq.data(), n);
      for (int nrows = 1; nrows <= kRows; ++nrows) {
        float out[kRows];
        drows(n, rows.data(), rb, nrows, xq.data(), out);
        for (int r = 0; r < nrows; ++r) {
          const float single = simd->dotq[static_cast<int>(t)](n, rows.data() + r * rb, xq.data());
          EXPECT_EQ(0, std::memcmp(&out[r], &single, 4)) << type_name(t) << " n " << n << " nrows " << nrows << " row " << r;
        }
      }
    }
  }
}

// Prefill of the lookup-bound formats decodes 8 weight rows at once (fewer at a matrix's end):
// every row's output has the bits of the single-row kernel on it.
TEST_P(IntKernelParity, DecodedRowsGiveTheSingleRowBits) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  const GgmlType t = GetParam();
  for (const KernelTable* simd : simd_tables()) {
    SCOPED_TRACE(simd->isa);
    const DecodeRows8Fn decode8 = simd->decode_rows8[static_cast<int>(t)];
    if (!decode8) continue;
    const GemmX8Fn gemm8 = simd->gemm_decoded8[static_cast<int>(t)];
    ASSERT_NE(gemm8, nullptr);
    const int n = 768;
    const size_t stride = row_bytes(GgmlType::Q8_K, n), rb = row_bytes(t, n);
    for (bool raw : {false, true}) {
      std::vector<uint8_t> rows;
      for (int r = 0; r < 8; ++r) {
        auto row = random_row(t, n, (raw ? 43 : 44) + 10 * r, raw);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      std::vector<uint8_t> xq(stride * 4), decoded(n / 256 * kDecodedX8BlockBytes);
      for (int r = 0; r < 4; ++r) {
        auto x = randn(n, 200 + r);
        quantize_row(GgmlType::Q8_K, x.data(), xq.data() + r * stride, n);
      }
      for (int nrows : {8, 5, 1}) {
        decode8(n, rows.data(), rb, nrows, decoded.data());
        for (int ntok = 1; ntok <= 4; ++ntok) {
          float out[32];
          gemm8(n, decoded.data(), xq.data(), stride, nullptr, 0, ntok, out);
          for (int tok = 0; tok < ntok; ++tok)
            for (int r = 0; r < 8; ++r) {
              const float want = r < nrows ? simd->dotq[static_cast<int>(t)](n, rows.data() + r * rb, xq.data() + tok * stride) : 0.f;
              EXPECT_EQ(0, std::memcmp(&out[tok * 8 + r], &want, 4))
                  << type_name(t) << " rows " << nrows << " ntok " << ntok << " token " << tok << " row " << r;
            }
        }
      }
    }
  }
}

// Prefill with many tokens takes them 16 per register (gemm_decoded_bands): every output, in full
// and partial bands, has the bits of the single-row kernel.
TEST(TokenBands, DecodedRowsGiveTheSingleRowBits) {
  int checked = 0;
  for (GgmlType t : kIntFormats) {
    for (const KernelTable* simd : simd_tables()) {
      SCOPED_TRACE(simd->isa);
      const GemmDecodedBandsFn bands_fn = simd->gemm_decoded_bands[static_cast<int>(t)];
      const DecodeRows8Fn decode8 = simd->decode_rows8[static_cast<int>(t)];
      if (!bands_fn || !decode8) continue;
      ++checked;
      const int n = 768, max_tok = kBandTokens * (kMaxBandsPerCall - 1) + 5;
      const size_t stride = row_bytes(GgmlType::Q8_K, n), rb = row_bytes(t, n);
      for (bool raw : {false, true}) {
        std::vector<uint8_t> rows;
        for (int r = 0; r < 8; ++r) {
          auto row = random_row(t, n, (raw ? 53 : 54) + 10 * r, raw);
          rows.insert(rows.end(), row.begin(), row.end());
        }
        std::vector<uint8_t> xq(stride * max_tok), decoded(n / 256 * kDecodedX8BlockBytes);
        for (int tok = 0; tok < max_tok; ++tok) {
          auto x = randn(n, 300 + tok);
          quantize_row(GgmlType::Q8_K, x.data(), xq.data() + tok * stride, n);
        }
        std::vector<uint8_t> bands(token_band_bytes(n) * kMaxBandsPerCall);
        for (int nrows : {8, 5, 1}) {
          decode8(n, rows.data(), rb, nrows, decoded.data());
          for (int ntok : {1, 7, 16, 17, max_tok}) {
            prepare_token_bands(n, xq.data(), stride, ntok, bands.data());
            const size_t ys = 11;  // outputs of token t at y[t * ys + r]
            std::vector<float> y(ys * ntok, -1.f);
            bands_fn(n, decoded.data(), bands.data(), token_band_bytes(n), ntok, nrows, y.data(), ys);
            for (int tok = 0; tok < ntok; ++tok)
              for (int r = 0; r < 8; ++r) {
                const float want = r < nrows ? simd->dotq[static_cast<int>(t)](n, rows.data() + r * rb, xq.data() + tok * stride) : -1.f;
                EXPECT_EQ(0, std::memcmp(&y[tok * ys + r], &want, 4))
                    << type_name(t) << " rows " << nrows << " ntok " << ntok << " token " << tok << " row " << r
                    << ": " << y[tok * ys + r] << " vs " << want;
              }
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no token-band kernel on this CPU (AVX-512 VNNI)";
  EXPECT_GE(checked, 11);  // every format with decoded rows
}

// The formats whose token-band kernel pairs two sub-blocks' sums in 16 bits (Q3_K, Q2_K, TQ1_0,
// TQ2_0; IQ1_M without the 128s: gemm_decoded_bands' BandScales) at their largest sums: every
// value at the format's largest magnitude (Q3_K -4 with sub-scales -32, Q2_K 3, TQ -1, IQ1_M -9)
// and every token code 127, which the band holds as 255. The sums reach the bound the kernel's
// comment gives, and the bits stay the single-row kernel's.
TEST(TokenBands, LargestSubBlockSumsGiveTheSingleRowBits) {
  struct Case {
    GgmlType t;
    uint8_t fill;   // every byte of the block before its f16 factors
    int factors;    // trailing f16 factors (d, dmin), set to 1
    int run;        // values per sub-block sum
    bool centred;   // the sums without the 128s
    int largest;    // the bound: run * 255 (127 centred) * largest |value|
  };
  const Case cases[] = {{GgmlType::Q3_K, 0x00, 1, 16, false, 16 * 255 * 4},
                        {GgmlType::Q2_K, 0xFF, 2, 16, false, 16 * 255 * 3},
                        {GgmlType::TQ1_0, 0x00, 1, 32, false, 32 * 255},
                        {GgmlType::TQ2_0, 0x00, 1, 32, false, 32 * 255},
                        {GgmlType::IQ1_M, 0x00, 0, 16, true, 16 * 127 * 9}};
  int checked = 0;
  for (const Case& c : cases)
    for (const KernelTable* simd : simd_tables()) {
      SCOPED_TRACE(std::string(simd->isa) + " " + type_name(c.t));
      const GemmDecodedBandsFn bands_fn = simd->gemm_decoded_bands[static_cast<int>(c.t)];
      const DecodeRows8Fn decode8 = simd->decode_rows8[static_cast<int>(c.t)];
      if (!bands_fn || !decode8) continue;
      ++checked;
      const int n = 512, ntok = kBandTokens;
      const size_t rb = row_bytes(c.t, n), block = rb / (n / 256), stride = row_bytes(GgmlType::Q8_K, n);
      std::vector<uint8_t> rows(8 * rb, c.fill);
      for (size_t b = 0; b < rows.size(); b += block)
        for (int f = 0; f < c.factors; ++f) {
          const uint16_t one = fp32_to_fp16(1.f);
          std::memcpy(&rows[b + block - 2 * (c.factors - f)], &one, 2);
        }
      if (c.t == GgmlType::IQ1_M)  // grid entry 0 (all -1) with the negative delta: -9; sub-scales 15; d = 1 (0x3C00)
        for (size_t b = 0; b < rows.size(); b += block) {
          BlockIQ1_M blk{};
          std::memset(blk.qh, 0x88, sizeof blk.qh);
          const uint16_t scales[4] = {0x0FFF, 0x0FFF, 0xCFFF, 0x3FFF};
          std::memcpy(blk.scales, scales, sizeof scales);
          std::memcpy(&rows[b], &blk, sizeof blk);
        }
      // Each 256-value block's largest magnitude is its value 5, negative: Q8_K makes it -127 and
      // every other code 127.
      std::vector<float> x(n, 1.f);
      for (int b = 0; b < n; b += 256) x[b + 5] = -1.001f;
      std::vector<uint8_t> xq(stride * ntok), decoded(n / 256 * kDecodedX8BlockBytes), bands(token_band_bytes(n));
      for (int tok = 0; tok < ntok; ++tok) quantize_row(GgmlType::Q8_K, x.data(), xq.data() + tok * stride, n);
      decode8(n, rows.data(), rb, 8, decoded.data());
      int largest = 0;
      const auto* blocks = reinterpret_cast<const DecodedX8Block*>(decoded.data());
      const auto* q8 = reinterpret_cast<const BlockQ8_K*>(xq.data());
      for (int r = 0; r < 8; ++r)
        for (int j0 = 0; j0 < n; j0 += c.run) {
          int sum = 0;
          for (int j = j0; j < j0 + c.run; ++j)
            sum += (q8[j / 256].qs[j % 256] + (c.centred ? 0 : 128)) * blocks[j / 256].v[j % 256 / 4][4 * r + j % 4];
          largest = std::max(largest, std::abs(sum));
        }
      EXPECT_EQ(largest, c.largest);
      prepare_token_bands(n, xq.data(), stride, ntok, bands.data());
      std::vector<float> y(8 * ntok);
      bands_fn(n, decoded.data(), bands.data(), token_band_bytes(n), ntok, 8, y.data(), 8);
      for (int tok = 0; tok < ntok; ++tok)
        for (int r = 0; r < 8; ++r) {
          const float want = simd->dotq[static_cast<int>(c.t)](n, rows.data() + r * rb, xq.data() + tok * stride);
          EXPECT_EQ(0, std::memcmp(&y[tok * 8 + r], &want, 4)) << "token " << tok << " row " << r << ": " << y[tok * 8 + r] << " vs " << want;
        }
    }
  if (checked == 0) GTEST_SKIP() << "no token-band kernel on this CPU (AVX-512 VNNI)";
  EXPECT_GE(checked, 5);
}

// Through matmul: a batch (decoded rows; with 70 tokens, two calls of token bands where the CPU
// has them) and the tokens one at a time give the same bits.
TEST(Ops, LookupFormatBatchesMatchSingleTokens) {
  for (const int ntok : {9, 70}) {
    const int rows = 21, cols = 512;
    for (GgmlType t : {GgmlType::IQ2_XS, GgmlType::IQ3_S, GgmlType::Q3_K, GgmlType::Q2_K, GgmlType::TQ1_0}) {
      auto w = randn(rows * cols, 5);
      const size_t rb = row_bytes(t, cols);
      std::vector<uint8_t> wq(rb * rows);
      for (int r = 0; r < rows; ++r) quantize_row(t, w.data() + r * cols, wq.data() + r * rb, cols);
      ops::Matrix m{t, rows, cols, wq.data(), rb};
      auto x = randn(ntok * cols, 6);
      std::vector<float> batch(ntok * rows), one(rows);
      ThreadPool p2(2);
      ops::matmul(m, x.data(), ntok, batch.data(), p2);
      for (int i = 0; i < ntok; ++i) {
        ops::matmul(m, x.data() + i * cols, 1, one.data(), p2);
        EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + i * rows, rows * 4)) << type_name(t) << " token " << i;
      }
    }
  }
}

// ---- Kernels on weights packed 8 rows at a time ----
const GgmlType kPackFormats[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,   GgmlType::Q4_1, GgmlType::Q5_1,
                                 GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                 GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::TQ2_0, GgmlType::F16, GgmlType::BF16,
                                 GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                                 GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::TQ1_0};

// Random rows (alternately quantized floats and raw random blocks), packed; activation rows
// prepared as matmul prepares them.
struct PackedCase {
  GgmlType t;
  int rows, cols;
  size_t row_stride = 0, group_bytes = 0, x_stride = 0, sums_stride = 0;
  std::vector<uint8_t> file, packed, xq;
  std::vector<float> x, xdeq;  // f32 activations and what the kernel sees of them
  std::vector<Q8BlockInfo> sums;

  PackedCase(GgmlType type, int n_rows, int n_cols, int ntok, uint32_t seed) : t(type), rows(n_rows), cols(n_cols) {
    row_stride = row_bytes(t, cols);
    for (int r = 0; r < rows; ++r) {
      auto row = random_row(t, cols, seed + r, r % 2 == 1);
      file.insert(file.end(), row.begin(), row.end());
    }
    group_bytes = packed_group_bytes(t, cols);
    packed.resize(packed_matrix_bytes(t, rows / 8, cols));
    pack_matrix8(t, file.data(), row_stride, cols, 0, rows / 8, packed.data());
    x = randn(static_cast<size_t>(ntok) * cols, seed + 999, 3.f);
    const GgmlType at = activation_type(t);
    xdeq = x;
    if (at == GgmlType::F32) {
      x_stride = cols * sizeof(float);
      xq.resize(x.size() * sizeof(float));
      std::memcpy(xq.data(), x.data(), xq.size());
      return;
    }
    x_stride = row_bytes(at, cols);
    xq.resize(x_stride * ntok);
    sums_stride = cols / 32;
    sums.resize(sums_stride * ntok);
    for (int i = 0; i < ntok; ++i) {
      quantize_row(at, x.data() + i * cols, xq.data() + i * x_stride, cols);
      dequantize_row_ref(at, xq.data() + i * x_stride, xdeq.data() + i * cols, cols);
      if (at == GgmlType::Q8_0) q8_0_block_info(xq.data() + i * x_stride, cols, sums.data() + i * sums_stride);
    }
  }
  const uint8_t* group(int g) const { return packed.data() + packed_group_offset(t, group_bytes, g); }
  size_t call_stride() const { return packed_call_stride(t, group_bytes); }
  void run(GemmX8Fn f, int g, int tok0, int ntok, float* out) const {
    f(cols, group(g), xq.data() + x_stride * tok0, x_stride,
      sums.data() + sums_stride * tok0, sums_stride, ntok, out);
  }
};

class PackedKernels : public ::testing::TestWithParam<GgmlType> {};

TEST_P(PackedKernels, SimdMatchesScalarReferenceBitForBit) {
  const GgmlType t = GetParam();
  const GemmX8Fn ref = scalar_kernels().gemm_x8[static_cast<int>(t)];
  ASSERT_NE(ref, nullptr);
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (int trial = 0; trial < 6; ++trial) {
    PackedCase c(t, 16, trial % 2 ? 512 : 768, 4, 300 + 50 * trial);
    for (const KernelTable* simd : simd_tables()) {
      const GemmX8Fn f = simd->gemm_x8[static_cast<int>(t)];
      ASSERT_NE(f, nullptr) << simd->isa << " " << type_name(t);
      for (int g = 0; g < 2; ++g)
        for (int ntok = 1; ntok <= 4; ++ntok) {
          float a[32], b[32];
          c.run(ref, g, 0, ntok, a);
          c.run(f, g, 0, ntok, b);
          EXPECT_EQ(0, std::memcmp(a, b, sizeof(float) * 8 * ntok)) << simd->isa << " " << type_name(t) << " ntok " << ntok;
        }
    }
  }
}

TEST_P(PackedKernels, MatchesFileLayoutDotWithinRounding) {
  const GgmlType t = GetParam();
  PackedCase c(t, 8, 1024, 3, 7);
  float out[24];
  c.run(scalar_kernels().gemm_x8[static_cast<int>(t)], 0, 0, 3, out);
  for (int i = 0; i < 3; ++i)
    for (int r = 0; r < 8; ++r) {
      const uint8_t* row = c.file.data() + c.row_stride * r;
      const float* xa = c.xdeq.data() + i * c.cols;
      std::vector<float> w(c.cols);
      dequantize_row_ref(t, row, w.data(), c.cols);
      double mag = 0;
      for (int k = 0; k < c.cols; ++k) mag += std::fabs(static_cast<double>(w[k]) * xa[k]);
      EXPECT_NEAR(out[i * 8 + r], dot_row_ref(t, c.cols, row, xa), 4.0 * c.cols * 1.19e-7 * mag + 1e-6)
          << type_name(t) << " row " << r << " token " << i;
    }
}

// The packers that rearrange bits word-wide put every value where gemm_x8.h says: read back from
// those places, each value dequantizes as the file's reference does, bit for bit.
TEST(PackedLayouts, ValuesSitWhereTheHeaderSays) {
  for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q6_K, GgmlType::F16, GgmlType::BF16})
    for (int trial = 0; trial < 4; ++trial) {
      PackedCase c(t, 40, 256 * (1 + trial), 1, 90 + trial);
      for (int g = 0; g < 5; ++g) {
        // F16, BF16: blocks of 4 groups, the block's group j at 16 j (its columns 64 bytes apart)
        const bool half = t == GgmlType::F16 || t == GgmlType::BF16;
        const uint8_t* p = c.packed.data() + (half ? c.group_bytes * (g / 4 * 4) + 16 * (g % 4) : c.group_bytes * g);
        for (int r = 0; r < 8; ++r) {
          std::vector<float> want(c.cols);
          dequantize_row_ref(t, c.file.data() + c.row_stride * (8 * g + r), want.data(), c.cols);
          for (int k = 0; k < c.cols; ++k) {
            float got = 0;
            if (t == GgmlType::F16 || t == GgmlType::BF16) {
              uint16_t v;
              std::memcpy(&v, p + 64 * static_cast<size_t>(k) + 2 * r, 2);
              got = t == GgmlType::F16 ? fp16_to_fp32(v) : bf16_to_fp32(v);
            } else if (t == GgmlType::Q6_K) {
              const auto& B = reinterpret_cast<const BlockQ6_Kx8*>(p)[k / 256];
              // value j: plane m = j / 64 at H = j % 64 / 4; the last plane in the others' top bits
              const int j = k % 256, H = j % 64 / 4, m = j / 64, at = r * 4 + j % 4;
              int code = 0;
              if (m < 3) code = B.q[(3 * H + m) * 32 + at] & 63;
              else
                for (int p = 0; p < 3; ++p) code |= (B.q[(3 * H + p) * 32 + at] >> 6) << (2 * p);
              got = fp16_to_fp32(B.d[r]) * B.sc[j / 16][r] * (code - 32);
            } else {
              const int j = k % 32, b = j % 16;
              const auto read = [&](const auto& B) {
                const uint8_t byte = B.qs[(b / 4) * 32 + r * 4 + b % 4];
                return (j < 16 ? byte & 15 : byte >> 4) | ((B.qh[r * 4 + j % 4] >> (j / 4)) & 1) << 4;
              };
              if (t == GgmlType::Q5_0) {
                const auto& B = reinterpret_cast<const BlockQ5_0x8*>(p)[k / 32];
                got = (read(B) - 16) * fp16_to_fp32(B.d[r]);
              } else {
                const auto& B = reinterpret_cast<const BlockQ5_1x8*>(p)[k / 32];
                got = read(B) * fp16_to_fp32(B.d[r]) + fp16_to_fp32(B.m[r]);
              }
            }
            ASSERT_EQ(std::bit_cast<uint32_t>(want[k]), std::bit_cast<uint32_t>(got))
                << type_name(t) << " group " << g << " row " << r << " value " << k << ": " << want[k] << " vs " << got;
          }
        }
      }
    }
}

// Q2_K, Q3_K, TQ2_0, the lattice i-quants and TQ1_0 (grown into TQ2_0's layout): the packed kernels do the file-layout integer
// kernel's arithmetic, so a row gives the same bits packed or not (the rows left over after the
// last group of 8 stay in file layout).
TEST(PackedKernels2, KAndLatticeQuantsGiveTheFileLayoutKernelsBits) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ2_0, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                     GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::TQ1_0})
    for (int trial = 0; trial < 4; ++trial) {
      PackedCase c(t, 8, 256 * (1 + 3 * trial), 4, 40 + trial);
      for (const KernelTable* simd : simd_tables()) {
        const QDotFn dq = simd->dotq[static_cast<int>(t)];
        ASSERT_NE(dq, nullptr);
        for (const GemmX8Fn f : {simd->gemm_x8[static_cast<int>(t)], scalar_kernels().gemm_x8[static_cast<int>(t)]}) {
          float out[32];
          c.run(f, 0, 0, 4, out);
          for (int i = 0; i < 4; ++i)
            for (int r = 0; r < 8; ++r) {
              const float want = dq(c.cols, c.file.data() + c.row_stride * r, c.xq.data() + c.x_stride * i);
              EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(out[8 * i + r]))
                  << simd->isa << " " << type_name(t) << " row " << r << " token " << i << ": " << want << " vs " << out[8 * i + r];
            }
        }
      }
    }
}

// Prefill from a packed copy decodes it into the block the file-layout decoder makes of the same
// rows, byte for byte.
TEST(PackedKernels2, DecodedFromPackedIsDecodedFromFile) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  int checked = 0;
  for (GgmlType t : kPackFormats)
    for (const KernelTable* simd : simd_tables()) {
      const DecodePacked8Fn from_packed = simd->decode_packed8[static_cast<int>(t)];
      const DecodeRows8Fn from_file = simd->decode_rows8[static_cast<int>(t)];
      if (!from_packed || !from_file) continue;
      for (int trial = 0; trial < 3; ++trial) {
        PackedCase c(t, 8, 256 * (1 + trial), 1, 70 + trial);
        std::vector<uint8_t> a(c.cols / 256 * kDecodedX8BlockBytes), b(a.size());
        from_packed(c.cols, c.packed.data(), a.data());
        from_file(c.cols, c.file.data(), c.row_stride, 8, b.data());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size())) << simd->isa << " " << type_name(t) << " trial " << trial;
        ++checked;
      }
    }
  EXPECT_GE(checked, 18);  // Q3_K and the five lattice i-quants
}

// Prefill of packed weights in token bands (decode_packed8, then gemm_decoded_bands): every
// output, in full and partial bands, has the bits of the packed kernel on that token alone.
TEST(TokenBands, DecodedPackedGroupsGiveThePackedKernelsBits) {
  int checked = 0;
  for (GgmlType t : kPackFormats)
    for (const KernelTable* simd : simd_tables()) {
      const GemmDecodedBandsFn bands_fn = simd->gemm_decoded_bands[static_cast<int>(t)];
      const DecodePacked8Fn decode8 = simd->decode_packed8[static_cast<int>(t)];
      if (!bands_fn || !decode8) continue;
      ++checked;
      const int max_tok = kBandTokens * (kMaxBandsPerCall - 1) + 5;
      PackedCase c(t, 8, 768, max_tok, 90);
      std::vector<uint8_t> decoded(c.cols / 256 * kDecodedX8BlockBytes), bands(token_band_bytes(c.cols) * kMaxBandsPerCall);
      decode8(c.cols, c.packed.data(), decoded.data());
      for (int ntok : {5, 16, 33, max_tok}) {
        prepare_token_bands(c.cols, c.xq.data(), c.x_stride, ntok, bands.data());
        std::vector<float> y(8 * ntok);
        bands_fn(c.cols, decoded.data(), bands.data(), token_band_bytes(c.cols), ntok, 8, y.data(), 8);
        for (int tok = 0; tok < ntok; ++tok) {
          float want[8];
          c.run(simd->gemm_x8[static_cast<int>(t)], 0, tok, 1, want);
          EXPECT_EQ(0, std::memcmp(&y[8 * tok], want, sizeof want)) << simd->isa << " " << type_name(t) << " ntok " << ntok << " token " << tok;
        }
      }
    }
  if (checked == 0) GTEST_SKIP() << "no token-band kernel on this CPU (AVX-512 VNNI)";
  EXPECT_GE(checked, 10);  // Q2_K, Q3_K, Q5_K, Q6_K, IQ4_XS and the five lattice i-quants
}

// Through matmul: 5 packed groups plus 5 rows in file layout; the logits of a token must not
// depend on the batch it came in or on the thread count.
TEST_P(PackedKernels, MatmulOutputDoesNotDependOnBatchOrThreads) {
  const GgmlType t = GetParam();
  const int rows = 45, cols = 512, ntok = 7;
  PackedCase c(t, rows, cols, ntok, 11);
  {
    ops::Matrix m{t, rows, cols, c.file.data(), c.row_stride};
    m.packed = c.packed.data();
    m.packed_stride = c.group_bytes;
    ThreadPool p1(1), p2(2);
    std::vector<float> batch(rows * ntok), batch2(rows * ntok), one(rows);
    ops::matmul(m, c.x.data(), ntok, batch.data(), p2);
    ops::matmul(m, c.x.data(), ntok, batch2.data(), p1);
    EXPECT_EQ(0, std::memcmp(batch.data(), batch2.data(), batch.size() * 4)) << type_name(t);
    for (int i = 0; i < ntok; ++i) {
      ops::matmul(m, c.x.data() + i * cols, 1, one.data(), p2);
      EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + i * rows, rows * 4)) << type_name(t) << " token " << i;
    }
    // And it agrees with the file-layout path within rounding.
    ops::Matrix plain{t, rows, cols, c.file.data(), c.row_stride};
    std::vector<float> y(rows * ntok);
    ops::matmul(plain, c.x.data(), ntok, y.data(), p2);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(batch[i], y[i], 2e-3 * (1 + std::fabs(y[i]))) << type_name(t) << " " << i;
  }
}

// Formats with a several-groups kernel: each group's outputs are gemm_x8's bits for that group.
TEST(PackedGroups, GroupsPerCallGiveTheSingleGroupBits) {
  std::vector<const KernelTable*> tables = simd_tables();
  tables.push_back(&scalar_kernels());
  std::set<GgmlType> seen;
  for (GgmlType type : kPackFormats) {
    PackedCase c(type, 8 * kMaxGroupsPerCall, 512, kPackMaxTokens, 21);
    const GemmX8Fn ref = scalar_kernels().gemm_x8[static_cast<int>(type)];
    for (const KernelTable* k : tables) {
      const GemmGroupsFn f = k->gemm_groups[static_cast<int>(type)];
      if (!f) continue;
      seen.insert(type);
      const int max_groups = k->groups_per_call[static_cast<int>(type)];
      ASSERT_GE(max_groups, 1);
      ASSERT_LE(max_groups, kMaxGroupsPerCall);
      // Decode's count (0: the same) is one of those checked below.
      const int decode_groups = k->decode_groups_per_call[static_cast<int>(type)];
      EXPECT_TRUE(decode_groups >= 0 && decode_groups <= max_groups) << k->isa << " " << type_name(type);
      for (int ng = 1; ng <= max_groups; ++ng)
        for (int ntok = 1; ntok <= kPackMaxTokens; ++ntok) {
          float all[kPackMaxTokens * kMaxGroupsPerCall * 8];
          const size_t width = 8 * static_cast<size_t>(ng);
          f(c.cols, c.group(0), c.call_stride(), ng, c.xq.data(), c.x_stride, c.sums.data(), c.sums_stride, ntok, all,
            width);
          for (int g = 0; g < ng; ++g) {
            float one[kPackMaxTokens * 8];
            c.run(ref, g, 0, ntok, one);
            for (int t = 0; t < ntok; ++t)
              EXPECT_EQ(0, std::memcmp(one + 8 * t, all + width * t + 8 * g, 32))
                  << k->isa << " " << type_name(type) << " groups " << ng << " ntok " << ntok;
          }
        }
    }
  }
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q5_0})
    EXPECT_TRUE(seen.count(t)) << type_name(t) << " has no several-groups kernel";
}

// Prefill on AMX tiles: one or two packed groups times full and partial tiles of 16 tokens; every
// output has the scalar packed kernel's bits for its group and token, and nothing past the
// groups' rows is written.
TEST(AmxTiles, PackedGroupsGiveThePackedKernelsBits) {
  const KernelTable* k = amx_kernels();
  if (!k) GTEST_SKIP() << "no AMX-INT8 on this CPU, or the OS does not grant the tile state";
  int checked = 0;
  const int max_tok = 40;
  for (GgmlType type : kPackFormats) {
    const GemmAmxFn f = k->gemm_amx[static_cast<int>(type)];
    if (!f) continue;
    ++checked;
    for (int cols : {512, 96 * 32}) {  // an even and an odd block count (16 and 96 blocks)
      PackedCase c(type, 16, cols == 512 ? 512 : 32 * 97, max_tok, 31 + checked);
      const GemmX8Fn ref = scalar_kernels().gemm_x8[static_cast<int>(type)];
      for (int ng : {1, 2})
        for (int ntok : {5, 16, 17, max_tok}) {
          const size_t width = 20;  // wider than the 16 rows: the rest must stay untouched
          std::vector<float> y(width * ntok, -7.f);
          f(c.cols, c.group(0), c.call_stride(), ng, c.xq.data(), c.x_stride, c.sums.data(), c.sums_stride, ntok,
            y.data(), width);
          for (int tok = 0; tok < ntok; ++tok) {
            for (int g = 0; g < ng; ++g) {
              float want[8];
              c.run(ref, g, tok, 1, want);
              EXPECT_EQ(0, std::memcmp(&y[width * tok + 8 * g], want, sizeof want))
                  << type_name(type) << " cols " << c.cols << " groups " << ng << " ntok " << ntok << " token " << tok;
            }
            for (size_t r = 8 * ng; r < width; ++r) EXPECT_EQ(y[width * tok + r], -7.f) << type_name(type);
          }
        }
    }
  }
  EXPECT_GE(checked, 6);  // Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL
}

// AMX tiles on decoded rows (file layout): two groups of rows, the second full, partial or
// absent, times full and partial tiles of tokens; every output has the single-row kernel's bits.
TEST(AmxTiles, DecodedRowsGiveTheSingleRowBits) {
  const KernelTable* k = amx_kernels();
  if (!k) GTEST_SKIP() << "no AMX-INT8 on this CPU, or the OS does not grant the tile state";
  int checked = 0;
  for (GgmlType t : kIntFormats) {
    const GemmAmxDecodedFn f = k->gemm_amx_decoded[static_cast<int>(t)];
    const DecodeRows8Fn decode8 = k->decode_rows8[static_cast<int>(t)];
    if (!f || !decode8) continue;
    ++checked;
    const int n = 768, max_tok = 40;
    const size_t stride = row_bytes(GgmlType::Q8_K, n), rb = row_bytes(t, n);
    for (bool raw : {false, true}) {
      std::vector<uint8_t> rows;
      for (int r = 0; r < 16; ++r) {
        auto row = random_row(t, n, (raw ? 153 : 154) + 10 * r, raw);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      std::vector<uint8_t> xq(stride * max_tok), dec0(n / 256 * kDecodedX8BlockBytes), dec1(dec0.size());
      for (int tok = 0; tok < max_tok; ++tok) {
        auto x = randn(n, 400 + tok);
        quantize_row(GgmlType::Q8_K, x.data(), xq.data() + tok * stride, n);
      }
      decode8(n, rows.data(), rb, 8, dec0.data());
      for (int nrows : {16, 13, 8}) {
        if (nrows > 8) decode8(n, rows.data() + 8 * rb, rb, nrows - 8, dec1.data());
        for (int ntok : {1, 7, 16, 17, max_tok}) {
          const size_t ys = 19;  // outputs of token t at y[t * ys + r]
          std::vector<float> y(ys * ntok, -1.f);
          f(n, dec0.data(), nrows > 8 ? dec1.data() : nullptr, nrows, xq.data(), stride, ntok, y.data(), ys);
          for (int tok = 0; tok < ntok; ++tok)
            for (size_t r = 0; r < ys; ++r) {
              const float want = static_cast<int>(r) < nrows ? k->dotq[static_cast<int>(t)](n, rows.data() + r * rb, xq.data() + tok * stride) : -1.f;
              EXPECT_EQ(0, std::memcmp(&y[tok * ys + r], &want, 4))
                  << type_name(t) << (raw ? " raw" : "") << " rows " << nrows << " ntok " << ntok << " token " << tok
                  << " row " << r << ": " << y[tok * ys + r] << " vs " << want;
            }
        }
      }
    }
  }
  EXPECT_GE(checked, 11);  // every format with decoded rows
}

// AMX tiles on packed groups decoded 8 rows at a time (the K-quants, IQ4_XS, TQ2_0 and the
// lattice i-quants' grown layouts): every output has the scalar packed kernel's bits.
TEST(AmxTiles, DecodedPackedGroupsGiveThePackedKernelsBits) {
  const KernelTable* k = amx_kernels();
  if (!k) GTEST_SKIP() << "no AMX-INT8 on this CPU, or the OS does not grant the tile state";
  int checked = 0;
  for (GgmlType t : kPackFormats) {
    const GemmAmxDecodedFn f = k->gemm_amx_decoded[static_cast<int>(t)];
    const DecodePacked8Fn decode8 = k->decode_packed8[static_cast<int>(t)];
    if (!f || !decode8) continue;
    ++checked;
    const int max_tok = 40;
    PackedCase c(t, 16, 768, max_tok, 190);
    std::vector<uint8_t> dec0(c.cols / 256 * kDecodedX8BlockBytes), dec1(dec0.size());
    decode8(c.cols, c.packed.data(), dec0.data());
    decode8(c.cols, c.group(1), dec1.data());
    const GemmX8Fn ref = scalar_kernels().gemm_x8[static_cast<int>(t)];
    for (int ng : {1, 2})
      for (int ntok : {5, 16, 33, max_tok}) {
        std::vector<float> y(16 * ntok, -1.f);
        f(c.cols, dec0.data(), ng > 1 ? dec1.data() : nullptr, 8 * ng, c.xq.data(), c.x_stride, ntok, y.data(), 16);
        for (int tok = 0; tok < ntok; ++tok)
          for (int g = 0; g < 2; ++g) {
            float want[8];
            if (g < ng) c.run(ref, g, tok, 1, want);
            else std::fill(want, want + 8, -1.f);
            EXPECT_EQ(0, std::memcmp(&y[16 * tok + 8 * g], want, sizeof want))
                << type_name(t) << " groups " << ng << " ntok " << ntok << " token " << tok;
          }
      }
  }
  EXPECT_GE(checked, 13);  // Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, TQ2_0 and the seven lattice i-quants
}

// Through matmul with enough tokens for the tiles (where the CPU has them): 5 packed groups (the
// last unit a single group) plus 5 rows in file layout; every token's outputs have the bits of
// that token alone.
TEST(AmxTiles, MatmulBatchesMatchSingleTokens) {
  const int rows = 45, cols = 512, ntok = 50;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::IQ3_S}) {
    PackedCase c(t, rows, cols, ntok, 77);
    ops::Matrix m{t, rows, cols, c.file.data(), c.row_stride};
    m.packed = c.packed.data();
    m.packed_stride = c.group_bytes;
    ThreadPool p2(2);
    std::vector<float> batch(rows * ntok), one(rows);
    ops::matmul(m, c.x.data(), ntok, batch.data(), p2);
    for (int i = 0; i < ntok; ++i) {
      ops::matmul(m, c.x.data() + i * cols, 1, one.data(), p2);
      EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + i * rows, rows * 4)) << type_name(t) << " token " << i;
    }
  }
}

// F16 and BF16 prefill one chunk of columns at a time (the order matmul calls it in): after the
// last chunk every output has gemm_x8's bits for its group and token, and nothing outside the
// groups' rows is written.
TEST(PackedGroups, HalfWideChunksGiveTheSingleGroupBits) {
  int checked = 0;
  const int cols = 2 * kHalfWideChunk + 96;  // a short last chunk
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16})
    for (const KernelTable* k : simd_tables()) {
      const GemmHalfWideFn wide = k->gemm_half_wide[static_cast<int>(type)];
      if (!wide) continue;
      ++checked;
      const int max_groups = k->half_wide_groups[static_cast<int>(type)];
      ASSERT_GE(max_groups, 1);
      const int max_tok = 27;
      PackedCase c(type, 8 * max_groups, cols, max_tok, 31);
      const GemmX8Fn ref = scalar_kernels().gemm_x8[static_cast<int>(type)];
      for (int ng = 1; ng <= max_groups; ++ng)
        for (int ntok : {1, 5, 8, 9, 17, max_tok}) {
          const size_t ys = 8 * static_cast<size_t>(max_groups) + 8;  // wider than the groups
          std::vector<float> y(ys * ntok, std::numeric_limits<float>::quiet_NaN());
          for (int k0 = 0; k0 < cols; k0 += kHalfWideChunk)
            wide(k0, std::min(kHalfWideChunk, cols - k0), c.group(0), c.call_stride(), ng, c.group(ng), c.x.data(),
                 static_cast<size_t>(cols), ntok, y.data(), ys);
          for (int g = 0; g < ng; ++g)
            for (int t = 0; t < ntok; ++t) {
              float want[8];
              c.run(ref, g, t, 1, want);
              EXPECT_EQ(0, std::memcmp(want, &y[ys * t + 8 * g], sizeof want))
                  << k->isa << " " << type_name(type) << " groups " << ng << " ntok " << ntok << " token " << t;
            }
          for (int t = 0; t < ntok; ++t)
            for (size_t r = 8 * static_cast<size_t>(ng); r < ys; ++r)
              EXPECT_TRUE(std::isnan(y[ys * t + r])) << k->isa << " " << type_name(type) << " wrote row " << r;
        }
    }
  if (checked == 0) GTEST_SKIP() << "CPU has no AVX2";
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedKernels, ::testing::ValuesIn(kPackFormats),
                         [](const auto& info) { return type_name(info.param); });

TEST(Quant, SimdActivationQuantizersGiveTheReferenceBytes) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (GgmlType at : {GgmlType::Q8_0, GgmlType::Q8_K, GgmlType::F16}) {
    const int n = 1024;
    for (int trial = 0; trial < 40; ++trial) {
      auto x = randn(n, 600 + trial, trial % 4 == 0 ? 1e-3f : 2.f);
      if (at == GgmlType::F16 && trial % 5 == 4) {  // f16's edges: overflow, subnormals, ties, NaN
        const float edges[] = {65504.f, 65519.f, 65520.f, -1e6f, std::numeric_limits<float>::infinity(), 6e-8f, 3e-8f,
                               2.98e-8f, -1e-7f, 1.f + 1.f / 2048, 1.f + 3.f / 2048, -0.f,
                               std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), 1e-40f};
        for (size_t k = 0; k < std::size(edges); ++k) x[37 * k + trial] = edges[k];
      }
      if (trial % 5 == 1) std::fill(x.begin(), x.begin() + 256, 0.f);   // an all-zero block
      if (trial % 5 == 2) x[200] = std::fabs(x[200]) + 9.f, x[3] = -x[200];  // two of largest magnitude
      if (trial % 5 == 3)
        for (int i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i % 7 - 3);  // exact halves: ties to even
      std::vector<uint8_t> ref(row_bytes(at, n)), got(row_bytes(at, n));
      quantize_row(at, x.data(), ref.data(), n);
      for (const KernelTable* simd : simd_tables()) {
        std::fill(got.begin(), got.end(), 0xAB);
        simd->quantize_act[static_cast<int>(at)](x.data(), got.data(), n);
        EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size())) << simd->isa << " " << type_name(at) << " trial " << trial;
      }
    }
  }
}

TEST(Quant, Q8ActivationQuantizerMatchesGgmlRounding) {
  // 127/amax scaling and ties to even: x = 0.5 * amax/127 * k lands exactly on .5 for odd k.
  std::vector<float> x(32, 0.f);
  x[0] = 127.f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  BlockQ8_0 b;
  quantize_row(GgmlType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], -2);
}

// Round-trip error relative to the row's RMS: bounds from the code width of each format with
// room for the min/max scale choice of the reference quantizer.
double roundtrip_bound(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1e-3;
    case GgmlType::BF16: return 8e-3;
    case GgmlType::Q8_0: return 0.01;
    case GgmlType::Q6_K: return 0.04;
    case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q5_K: return 0.08;
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q4_K: case GgmlType::IQ4_NL: return 0.16;
    case GgmlType::IQ4_XS: return 0.16;
    case GgmlType::TQ1_0: case GgmlType::TQ2_0: return 0.9;  // ternary: meant for ternary-trained weights
    case GgmlType::Q3_K: return 0.30;
    case GgmlType::Q2_K: return 0.55;
    // Lattice i-quants (grid search): measured 0.136, 0.189, 0.245, 0.298, 0.353, 0.448, 0.489.
    case GgmlType::IQ3_S: return 0.16;
    case GgmlType::IQ3_XXS: return 0.21;
    case GgmlType::IQ2_S: return 0.28;
    case GgmlType::IQ2_XS: return 0.33;
    case GgmlType::IQ2_XXS: return 0.38;
    case GgmlType::IQ1_M: return 0.49;
    case GgmlType::IQ1_S: return 0.53;
    default: return 1;
  }
}

TEST_P(KernelParity, QuantizeRoundTripErrorIsBounded) {
  const GgmlType t = GetParam();
  if (!can_quantize(t)) GTEST_SKIP() << type_name(t) << " has no quantizer in this build";
  const int n = 4096;
  auto x = randn(n, 5);
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row_ref(t, q.data(), y.data(), n);
  double err = 0, ss = 0;
  for (int i = 0; i < n; ++i) {
    err += (x[i] - y[i]) * (x[i] - y[i]);
    ss += x[i] * x[i];
  }
  double rel = std::sqrt(err / ss);
  EXPECT_LE(rel, roundtrip_bound(t)) << type_name(t);
  std::printf("  %-7s round-trip relative RMS error %.4f\n", type_name(t).c_str(), rel);
}

// A block the lattice format represents exactly (random codes, the top scale code in use, block
// scale 1) must come back exactly: the search finds the exact scale and grid entries.
class LatticeQuantizer : public ::testing::TestWithParam<GgmlType> {};

TEST_P(LatticeQuantizer, RepresentableBlocksComeBackExactly) {
  const GgmlType t = GetParam();
  const size_t bytes = type_info(t).type_size;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<uint8_t> block(bytes);
    for (auto& b : block) b = static_cast<uint8_t>(rng());
    const uint16_t one = fp32_to_fp16(1.0f);
    if (t == GgmlType::IQ1_M) {
      auto* b = reinterpret_cast<BlockIQ1_M*>(block.data());
      b->scales[0] |= 7;  // first 16 values at the top scale code
      for (int k = 0; k < 4; ++k) b->scales[k] = static_cast<uint16_t>((b->scales[k] & 0x0FFF) | ((one >> (4 * k)) & 0xF) << 12);
    } else {
      std::memcpy(block.data(), &one, 2);
      switch (t) {
        case GgmlType::IQ2_XXS: reinterpret_cast<BlockIQ2_XXS*>(block.data())->qs[3] |= 0xF000; break;
        case GgmlType::IQ2_XS: reinterpret_cast<BlockIQ2_XS*>(block.data())->scales[0] |= 0xF; break;
        case GgmlType::IQ2_S: reinterpret_cast<BlockIQ2_S*>(block.data())->scales[0] |= 0xF; break;
        case GgmlType::IQ3_XXS: reinterpret_cast<BlockIQ3_XXS*>(block.data())->scales_signs[3] |= 0xF0; break;
        case GgmlType::IQ3_S: reinterpret_cast<BlockIQ3_S*>(block.data())->scales[0] |= 0xF; break;
        case GgmlType::IQ1_S: reinterpret_cast<BlockIQ1_S*>(block.data())->qh[0] |= 0x7000; break;
        default: FAIL() << type_name(t);
      }
    }
    std::vector<float> x(256), y(256);
    dequantize_row_ref(t, block.data(), x.data(), 256);
    std::vector<uint8_t> again(bytes);
    quantize_row(t, x.data(), again.data(), 256);
    dequantize_row_ref(t, again.data(), y.data(), 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << type_name(t) << " trial " << trial << " value " << i;
  }
}

TEST_P(LatticeQuantizer, ZeroAndConstantBlocksGiveValidCodes) {
  const GgmlType t = GetParam();
  std::vector<uint8_t> q(type_info(t).type_size);
  std::vector<float> y(256);
  std::vector<float> x(256, 0.f);
  quantize_row(t, x.data(), q.data(), 256);
  dequantize_row_ref(t, q.data(), y.data(), 256);
  for (float v : y) EXPECT_EQ(v, 0.f) << type_name(t);
  // A constant block: every value has the same sign and size, the worst case for 7-bit signs.
  x.assign(256, -0.37f);
  quantize_row(t, x.data(), q.data(), 256);
  dequantize_row_ref(t, q.data(), y.data(), 256);
  double err = 0;
  for (float v : y) err += (v + 0.37) * (v + 0.37);
  EXPECT_LT(std::sqrt(err / 256) / 0.37, 0.6) << type_name(t);
}

INSTANTIATE_TEST_SUITE_P(Formats, LatticeQuantizer,
                         ::testing::Values(GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                                           GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M),
                         [](const auto& info) { return type_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Formats, KernelParity, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return type_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Formats, IntKernelParity, ::testing::ValuesIn(kIntFormats),
                         [](const auto& info) { return type_name(info.param); });

TEST(Fp16, ConversionIsExactAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << h;
  }
  EXPECT_EQ(fp32_to_fp16(1.0f + 1.0f / 2048), fp32_to_fp16(1.0f));          // tie rounds to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3.0f / 2048), fp32_to_fp16(1.0f + 1.0f / 512));
  EXPECT_EQ(fp32_to_fp16(70000.f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(5.96e-8f), 0x0001);
}

TEST(Ops, MatmulMatchesReferenceAcrossThreadCounts) {
  const int rows = 37, cols = 256, ntok = 3;
  auto w = randn(rows * cols, 1);
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q4_K, cols) * rows);
  for (int r = 0; r < rows; ++r) quantize_row(GgmlType::Q4_K, w.data() + r * cols, wq.data() + r * row_bytes(GgmlType::Q4_K, cols), cols);
  ops::Matrix m{GgmlType::Q4_K, rows, cols, wq.data(), row_bytes(GgmlType::Q4_K, cols)};
  auto x = randn(ntok * cols, 2);
  std::vector<float> y1(ntok * rows), y2(ntok * rows);
  ThreadPool p1(1), p2(2);
  ops::matmul(m, x.data(), ntok, y1.data(), p1);
  ops::matmul(m, x.data(), ntok, y2.data(), p2);
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4));
  // Reference: the activations as matmul sees them, quantized to Q8_K and back.
  std::vector<float> xa(x.size());
  std::vector<uint8_t> xq(row_bytes(GgmlType::Q8_K, cols));
  for (int t = 0; t < ntok; ++t) {
    quantize_row(GgmlType::Q8_K, x.data() + t * cols, xq.data(), cols);
    dequantize_row_ref(GgmlType::Q8_K, xq.data(), xa.data() + t * cols, cols);
  }
  for (int t = 0; t < ntok; ++t)
    for (int r = 0; r < rows; ++r)
      EXPECT_NEAR(y1[t * rows + r], dot_row_ref(GgmlType::Q4_K, cols, m.row(r), xa.data() + t * cols), 1e-3);
}

// Random rows of type t; packed 8 rows at a time when `pack` (the rows after the last full group
// stay in file layout, as at model load).
struct TestMatrix {
  std::vector<uint8_t> file, packed;
  ops::Matrix m;
  TestMatrix(GgmlType t, int rows, int cols, bool pack, uint32_t seed) {
    const size_t rb = row_bytes(t, cols);
    for (int r = 0; r < rows; ++r) {
      auto row = random_row(t, cols, seed + r, r % 2 == 1);
      file.insert(file.end(), row.begin(), row.end());
    }
    m = {t, rows, cols, file.data(), rb};
    if (!pack) return;
    packed.resize(packed_matrix_bytes(t, rows / 8, cols));
    pack_matrix8(t, file.data(), rb, cols, 0, rows / 8, packed.data());
    m.packed = packed.data();
    m.packed_stride = packed_group_bytes(t, cols);
  }
  TestMatrix(const TestMatrix&) = delete;
};

// Q, K and V style: one call for several weights (packed with a file-layout tail, file layout
// only; Q8_0, Q8_K and f32 activations) gives each output the bits of its own matmul.
TEST(Ops, SharedInputProductsGiveEachMatmulsBits) {
  const int cols = 512;
  const TestMatrix a(GgmlType::Q4_0, 45, cols, true, 1), b(GgmlType::Q4_K, 16, cols, true, 2),
      c(GgmlType::IQ2_XS, 21, cols, false, 3), d(GgmlType::F16, 24, cols, true, 4), e(GgmlType::Q6_K, 8, cols, true, 5);
  const TestMatrix* ms[] = {&a, &b, &c, &d, &e};
  ThreadPool p1(1), p2(2);
  for (int ntok : {1, 3, 9})
    for (ThreadPool* pool : {&p1, &p2}) {
      const auto x = randn(static_cast<size_t>(ntok) * cols, 10 + ntok);
      std::vector<std::vector<float>> want, got;
      for (const TestMatrix* m : ms) {
        want.emplace_back(m->m.rows * ntok);
        got.emplace_back(m->m.rows * ntok, std::nanf(""));
        ops::matmul(m->m, x.data(), ntok, want.back().data(), *pool);
      }
      std::vector<ops::Product> ps;
      for (size_t i = 0; i < std::size(ms); ++i) ps.push_back({&ms[i]->m, got[i].data()});
      ops::matmul_shared(ps, x.data(), ntok, *pool);
      for (size_t i = 0; i < std::size(ms); ++i)
        EXPECT_EQ(0, std::memcmp(want[i].data(), got[i].data(), want[i].size() * 4))
            << type_name(ms[i]->m.type) << " ntok " << ntok << " threads " << pool->size();
    }
}

// The gated FFN's fused call gives the bits of two matmuls followed by the activation over all of
// it, whether gate and up split their rows alike (the activation runs per share) or not.
TEST(Ops, GatedProductIsTwoMatmulsThenTheActivation) {
  const int cols = 512;
  struct Pair {
    GgmlType g, u;
    int rows;
    bool pack_g, pack_u;
  };
  const Pair pairs[] = {{GgmlType::Q4_0, GgmlType::Q4_0, 45, true, true},     // packed, file-layout tail
                        {GgmlType::Q4_K, GgmlType::Q6_K, 40, true, true},     // two packed formats
                        {GgmlType::IQ2_XS, GgmlType::IQ2_XS, 37, false, false},  // file layout
                        {GgmlType::Q4_K, GgmlType::Q4_K, 45, true, false},    // split differently
                        {GgmlType::F16, GgmlType::F16, 24, true, true}};
  ThreadPool p1(1), p2(2);
  for (const Pair& pr : pairs) {
    const TestMatrix g(pr.g, pr.rows, cols, pr.pack_g, 20), u(pr.u, pr.rows, cols, pr.pack_u, 60);
    for (const ops::GatedFn act : {ops::GatedFn(ops::silu_mul), ops::GatedFn(ops::gelu_tanh_mul)})
      for (int ntok : {1, 5, 9})
        for (ThreadPool* pool : {&p1, &p2}) {
          const auto x = randn(static_cast<size_t>(ntok) * cols, 30 + ntok);
          const size_t n = static_cast<size_t>(ntok) * pr.rows;
          std::vector<float> wg(n), wu(n), gg(n, std::nanf("")), gu(n);
          ops::matmul(g.m, x.data(), ntok, wg.data(), *pool);
          ops::matmul(u.m, x.data(), ntok, wu.data(), *pool);
          act(wg.data(), wu.data(), wg.data(), static_cast<int>(n));
          ops::matmul_gated(g.m, u.m, x.data(), ntok, act, gg.data(), gu.data(), *pool);
          EXPECT_EQ(0, std::memcmp(wg.data(), gg.data(), n * 4))
              << type_name(pr.g) << "/" << type_name(pr.u) << " ntok " << ntok << " threads " << pool->size();
        }
  }
}

// Against the same functions in double precision. (The scalar gelu reference, 0.5x(1 + tanh a),
// loses relative accuracy where tanh a is near -1; the vector form x / (1 + exp(-2a)) does not.)
TEST(Ops, VectorActivationsMatchDoublePrecision) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  const int n = 1003;  // a tail shorter than a vector
  auto g = randn(n, 5, 4.f), u = randn(n, 6);
  g[0] = 95.f, g[1] = -95.f, g[2] = 0.f, g[3] = -1e-30f, g[4] = 30.f, g[5] = -30.f;  // beyond exp's range, zero, tiny
  for (const KernelTable* k : simd_tables()) {
    for (int which = 0; which < 2; ++which) {
      std::vector<float> got(n), ref(n);
      (which ? k->gelu_tanh_mul : k->silu_mul)(g.data(), u.data(), got.data(), n);
      if (!which) ops::silu_mul_ref(g.data(), u.data(), ref.data(), n);
      for (int i = 0; i < n; ++i) {
        const double x = g[i];
        const double z = which ? 2 * 0.79788456080286535588 * x * (1 + 0.044715 * x * x) : x;
        const double want = x / (1 + std::exp(-z)) * u[i];
        EXPECT_NEAR(got[i], want, 4e-6 * std::fabs(want) + 1e-30) << (which ? "gelu" : "silu") << " g=" << g[i];
        if (!which) {
          EXPECT_NEAR(ref[i], want, 4e-6 * std::fabs(want) + 1e-30) << "silu reference g=" << g[i];
        }
      }
    }
  }
}

TEST(Ops, VectorScaleGivesTheScalarBits) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  for (int n : {1, 7, 8, 64, 67}) {
    auto y0 = randn(n, 20 + n);
    for (const KernelTable* k : simd_tables()) {
      std::vector<float> a = y0, b = y0;
      scalar_kernels().scale(n, 1.0f / 3.0f, a.data());
      k->scale(n, 1.0f / 3.0f, b.data());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << k->isa << " n=" << n;
    }
  }
}

TEST(Ops, VectorExpShiftMatchesDoublePrecision) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  const int n = 37;
  auto x = randn(n, 31, 6.f);
  for (const KernelTable* k : simd_tables()) {
    std::vector<float> got(n);
    k->exp_shift(n, x.data(), 2.5f, got.data());
    for (int i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - 2.5);
      EXPECT_NEAR(got[i], want, 4e-6 * want) << k->isa << " x=" << x[i];
    }
  }
}

// Attention over f16 cells read in place (the f16 KV format) gives the bits of decoding the
// cells into rows and running the scalar page kernels: head sizes with and without whole vectors,
// partial 8-cell blocks, cells further apart than a head (KV heads interleaved), query groups
// in and past the kernels' blocks of rows.
TEST(Ops, AttentionOnF16CellsGivesTheDecodedRowsBits) {
  const KernelTable& ref = scalar_kernels();
  int checked = 0;
  for (const KernelTable* k : simd_tables()) {
    if (!k->attn_scores_f16 || !k->attn_values_f16) continue;
    ++checked;
    for (int dim : {64, 128, 256, 80, 12, 6})
      for (int nc : {16, 13, 8, 3, 1})
        for (int group : {1, 2, 3, 4, 5, 7, 8, 12}) {
          const int ld = 20;
          const size_t stride = static_cast<size_t>(dim) * 3 + 4;  // three heads apart, plus a little
          auto kf = randn(stride * nc, dim + nc, 2.f), vf = randn(stride * nc, 3 * dim + nc);
          std::vector<uint16_t> kh(kf.size()), vh(vf.size());
          for (size_t i = 0; i < kf.size(); ++i) kh[i] = fp32_to_fp16(kf[i]), vh[i] = fp32_to_fp16(vf[i]);
          std::vector<float> keys(static_cast<size_t>(nc) * dim), vals(static_cast<size_t>(nc) * dim);
          for (int c = 0; c < nc; ++c)
            for (int d = 0; d < dim; ++d) {
              keys[c * dim + d] = fp16_to_fp32(kh[c * stride + d]);
              vals[c * dim + d] = fp16_to_fp32(vh[c * stride + d]);
            }
          auto q = randn(static_cast<size_t>(group) * dim, 7 * dim);
          std::vector<float> a(group * ld, -1.f), b(group * ld, -1.f);
          k->attn_scores_f16(dim, nc, kh.data(), stride, q.data(), group, a.data(), ld);
          ref.attn_scores(dim, nc, keys.data(), q.data(), group, b.data(), ld);
          EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << k->isa << " scores dim " << dim << " nc " << nc << " group " << group;
          auto w = randn(static_cast<size_t>(group) * ld, 3 * nc), acc = randn(static_cast<size_t>(group) * dim, 5 * dim);
          std::vector<float> x = acc, y = acc;
          k->attn_values_f16(dim, nc, vh.data(), stride, w.data(), ld, group, x.data());
          ref.attn_values(dim, nc, vals.data(), w.data(), ld, group, y.data());
          EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * 4)) << k->isa << " values dim " << dim << " nc " << nc << " group " << group;
        }
  }
  if (checked == 0) GTEST_SKIP() << "no table with in-place f16 attention kernels on this CPU";
}

// The scalar reference's scores (eight running sums, then the dimensions past the last whole 8)
// are the dot products: within float rounding of a double-precision sum, for head sizes with and
// without a whole number of 8s, and with a score for every cell and row.
TEST(Ops, AttentionScoresReferenceIsTheDotProduct) {
  const KernelTable& ref = scalar_kernels();
  for (int dim : {128, 80, 12, 6, 1})
    for (int group : {1, 3}) {
      const int nc = 5, ld = 7;
      auto keys = randn(static_cast<size_t>(nc) * dim, dim + 3, 2.f), q = randn(static_cast<size_t>(group) * dim, dim + 11);
      std::vector<float> got(static_cast<size_t>(group) * ld, -1.f);
      ref.attn_scores(dim, nc, keys.data(), q.data(), group, got.data(), ld);
      for (int g = 0; g < group; ++g)
        for (int c = 0; c < nc; ++c) {
          double want = 0, mag = 0;
          for (int d = 0; d < dim; ++d) {
            const double p = static_cast<double>(q[g * dim + d]) * keys[c * dim + d];
            want += p, mag += std::fabs(p);
          }
          EXPECT_NEAR(got[g * ld + c], want, 1e-6 * mag + 1e-30) << "dim " << dim << " row " << g << " cell " << c;
        }
    }
}

// The page-wide attention kernels give the scalar references' bits, for head sizes with and
// without a whole number of vectors, pages with and without a whole number of 8-cell blocks, and
// query groups above 8.
TEST(Ops, AttentionPageKernelsGiveTheScalarBits) {
  if (simd_tables().empty()) GTEST_SKIP() << "CPU has no AVX2";
  const KernelTable& ref = scalar_kernels();
  for (const KernelTable* k : simd_tables())
    for (int dim : {64, 128, 256, 80, 12})
      for (int nc : {16, 13, 8, 3, 1})
        for (int group : {1, 7, 8, 12}) {
          const int ld = 20;
          auto keys = randn(static_cast<size_t>(nc) * dim, dim + nc, 2.f), q = randn(static_cast<size_t>(group) * dim, 7 * dim);
          std::vector<float> a(group * ld, -1.f), b(group * ld, -1.f);
          k->attn_scores(dim, nc, keys.data(), q.data(), group, a.data(), ld);
          ref.attn_scores(dim, nc, keys.data(), q.data(), group, b.data(), ld);
          EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << k->isa << " scores dim " << dim << " nc " << nc << " group " << group;
          auto w = randn(static_cast<size_t>(group) * ld, 3 * nc), acc = randn(static_cast<size_t>(group) * dim, 5 * dim);
          std::vector<float> x = acc, y = acc;
          k->attn_values(dim, nc, keys.data(), w.data(), ld, group, x.data());
          ref.attn_values(dim, nc, keys.data(), w.data(), ld, group, y.data());
          EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * 4)) << k->isa << " values dim " << dim << " nc " << nc << " group " << group;
          // And the scalar references against double precision.
          for (int g = 0; g < group; ++g)
            for (int c = 0; c < nc; ++c) {
              double s = 0, mag = 0;
              for (int d = 0; d < dim; ++d) {
                s += static_cast<double>(q[g * dim + d]) * keys[c * dim + d];
                mag += std::fabs(static_cast<double>(q[g * dim + d]) * keys[c * dim + d]);
              }
              EXPECT_NEAR(b[g * ld + c], s, 1e-6 * mag * dim);
            }
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < dim; ++d) {
              double s = acc[g * dim + d], mag = std::fabs(s);
              for (int c = 0; c < nc; ++c) {
                s += static_cast<double>(w[g * ld + c]) * keys[c * dim + d];
                mag += std::fabs(static_cast<double>(w[g * ld + c]) * keys[c * dim + d]);
              }
              EXPECT_NEAR(y[g * dim + d], s, 1e-6 * mag * (nc + 1));
            }
        }
}

TEST(Ops, RopeVariantsRotatePairs) {
  std::vector<float> a = {1, 0, 0, 0}, b = {1, 0, 0, 0};
  ops::rope(a.data(), 1, 4, 4, 1, 10000.f, false);  // pairs (0,1), (2,3)
  ops::rope(b.data(), 1, 4, 4, 1, 10000.f, true);   // pairs (0,2), (1,3)
  EXPECT_NEAR(a[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(a[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(b[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(b[2], std::sin(1.0), 1e-6);
  EXPECT_EQ(b[1], 0.f);
}

TEST(Ops, RmsNormAndSoftmax) {
  std::vector<float> x = {3, 4}, y(2), w = {1, 2};
  ops::rms_norm(x.data(), w.data(), 2, 0.f, y.data());
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y[1], 8 / std::sqrt(12.5), 1e-6);
  std::vector<float> s = {1000, 1000, 0};
  ops::softmax(s.data(), 3);
  EXPECT_NEAR(s[0], 0.5, 1e-6);
  EXPECT_NEAR(s[2], 0.0, 1e-6);
}

}  // namespace

TEST(Kernels, DispatchPicksTheBestTableForThisCpu) {
  const char* want = std::getenv("STRATA_ISA");
  if (want) GTEST_SKIP() << "STRATA_ISA is set";
  const char* expected = amx_kernels()           ? amx_kernels()->isa
                         : avx512_bitalg_kernels() ? "avx512vnni+bitalg"
                         : avx512_kernels()      ? "avx512vnni"
                         : avx2_kernels()        ? "avx2"
                                                 : "scalar";
  EXPECT_STREQ(kernels().isa, expected);
  std::printf("  tables: avx2 %s, avx512vnni %s, +bitalg %s, +amx %s; in use: %s\n", avx2_kernels() ? "yes" : "no",
              avx512_kernels() ? "yes" : "no", avx512_bitalg_kernels() ? "yes" : "no", amx_kernels() ? "yes" : "no",
              kernels().isa);
}

// An importance row moves the searching quantizers' error onto the columns that matter less: the
// importance-weighted error is lower with it than without.
TEST(QuantizerImportance, LowersTheImportanceWeightedError) {
  for (GgmlType t : {GgmlType::IQ2_XS, GgmlType::IQ3_XXS, GgmlType::IQ1_M, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    ASSERT_TRUE(uses_importance(t)) << type_name(t);
    const int n = 256 * 16;
    auto x = randn(n, 71);
    std::vector<float> imp(n);
    std::mt19937 rng(72);
    for (auto& v : imp) v = rng() % 8 == 0 ? 50.f : 1.f;
    std::vector<uint8_t> plain(row_bytes(t, n)), weighted(row_bytes(t, n));
    quantize_row_best(t, x.data(), plain.data(), n);
    quantize_row_best(t, x.data(), weighted.data(), n, imp.data());
    std::vector<float> a(n), b(n);
    dequantize_row_ref(t, plain.data(), a.data(), n);
    dequantize_row_ref(t, weighted.data(), b.data(), n);
    double ea = 0, eb = 0;
    for (int i = 0; i < n; ++i) {
      ea += imp[i] * (x[i] - a[i]) * (x[i] - a[i]);
      eb += imp[i] * (x[i] - b[i]) * (x[i] - b[i]);
    }
    std::printf("  %-7s importance-weighted error %.4g without, %.4g with\n", type_name(t).c_str(), ea, eb);
    EXPECT_LT(eb, 0.95 * ea) << type_name(t);
  }
  // Formats without an importance-aware quantizer give the plain bytes.
  const int n = 512;
  auto x = randn(n, 73);
  std::vector<float> imp(n, 1.f);
  imp[3] = 100.f;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::TQ2_0}) {
    ASSERT_FALSE(uses_importance(t)) << type_name(t);
    std::vector<uint8_t> plain(row_bytes(t, n)), weighted(plain.size());
    quantize_row(t, x.data(), plain.data(), n);
    quantize_row_best(t, x.data(), weighted.data(), n, imp.data());
    EXPECT_EQ(plain, weighted) << type_name(t);
  }
}

// Where quantize_row keeps the min/max rule (it also fills the KV cache), the model quantizer's
// scale search gives a lower round-trip error.
TEST(QuantizerSearch, BeatsTheMinMaxRule) {
  const int n = 256 * 16;
  auto x = randn(n, 74);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    std::vector<uint8_t> fast(row_bytes(t, n)), best(fast.size());
    quantize_row(t, x.data(), fast.data(), n);
    quantize_row_best(t, x.data(), best.data(), n);
    std::vector<float> a(n), b(n);
    dequantize_row_ref(t, fast.data(), a.data(), n);
    dequantize_row_ref(t, best.data(), b.data(), n);
    double ea = 0, eb = 0, sx = 0;
    for (int i = 0; i < n; ++i) ea += (x[i] - a[i]) * (x[i] - a[i]), eb += (x[i] - b[i]) * (x[i] - b[i]), sx += x[i] * x[i];
    std::printf("  %-7s relative RMS error %.4f with the min/max rule, %.4f searched\n", type_name(t).c_str(),
                std::sqrt(ea / sx), std::sqrt(eb / sx));
    EXPECT_LT(eb, 0.95 * ea) << type_name(t);
  }
}
