#include "ops/ops.h"

#include "quant/kernels.h"

#include <cmath>
#include <vector>

namespace strata::ops {

void rms_norm(const float* x, const float* w, int n, float eps, float* y) {
  // In double, where every square is exact and the order of the sum hardly matters; eight
  // partial sums, since one chain of dependent adds made this a few percent of a prompt's time.
  double part[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) part[k] += static_cast<double>(x[i + k]) * x[i + k];
  for (; i < n; ++i) part[i % 8] += static_cast<double>(x[i]) * x[i];
  const double ss = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  const float s = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  if (w) {
    for (int j = 0; j < n; ++j) y[j] = x[j] * s * w[j];
  } else {
    for (int j = 0; j < n; ++j) y[j] = x[j] * s;
  }
}

namespace {
// cos and sin of theta_i = pos * base^(-2i/n_rot), computed in double so the angle is exact to
// float. They depend only on (pos, base, n_rot), so Q and K of every layer at one position share
// them: each thread keeps the sets of the last positions it saw, two per slot (Gemma's sliding
// and global layers use two bases), so a prompt's positions are computed in its first layer only
// (recomputing them in every layer was about 1 % of a prompt's time).
struct RopeAngles {
  int pos = -1, n_rot = 0;
  float base = 0;
  std::vector<float> c, s;
};

const RopeAngles& rope_angles(int pos, float base, int n_rot) {
  constexpr int kSlots = 256;
  struct Slot {
    RopeAngles way[2];
    int oldest = 0;
  };
  thread_local std::vector<Slot> slots(kSlots);
  Slot& slot = slots[static_cast<unsigned>(pos) % kSlots];
  for (const RopeAngles& a : slot.way)
    if (a.pos == pos && a.base == base && a.n_rot == n_rot) return a;
  RopeAngles& a = slot.way[slot.oldest];
  slot.oldest ^= 1;
  const int half = n_rot / 2;
  a.c.resize(half);
  a.s.resize(half);
  for (int i = 0; i < half; ++i) {
    const double theta = pos * std::pow(static_cast<double>(base), -2.0 * i / n_rot);
    a.c[i] = static_cast<float>(std::cos(theta));
    a.s[i] = static_cast<float>(std::sin(theta));
  }
  a.pos = pos, a.base = base, a.n_rot = n_rot;
  return a;
}
}  // namespace

void rope(float* x, int n_head, int head_dim, int n_rot, int pos, float base, bool neox) {
  const int half = n_rot / 2;
  const RopeAngles& ang = rope_angles(pos, base, n_rot);
  const float* c = ang.c.data();
  const float* s = ang.s.data();
  for (int h = 0; h < n_head; ++h) {  // head by head: contiguous pairs (NeoX) the compiler vectorizes
    float* v = x + static_cast<size_t>(h) * head_dim;
    if (neox) {
      for (int i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c[i] - x1 * s[i];
        v[i + half] = x0 * s[i] + x1 * c[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c[i] - x1 * s[i];
        v[2 * i + 1] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

void softmax(float* x, int n) {
  float m = x[0];
  for (int i = 1; i < n; ++i) m = std::fmax(m, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(const float* g, const float* u, float* out, int n) {
  if (const GatedActFn f = kernels().silu_mul) return f(g, u, out, n);
  silu_mul_ref(g, u, out, n);
}

void gelu_tanh_mul(const float* g, const float* u, float* out, int n) {
  if (const GatedActFn f = kernels().gelu_tanh_mul) return f(g, u, out, n);
  gelu_tanh_mul_ref(g, u, out, n);
}

void silu_mul_ref(const float* g, const float* u, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

void gelu_tanh_mul_ref(const float* g, const float* u, float* out, int n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int i = 0; i < n; ++i) {
    float x = g[i];
    out[i] = 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * x * (1.f + 0.044715f * x * x))) * u[i];
  }
}

void add(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

void scale(float* x, float s, int n) {
  for (int i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace strata::ops
