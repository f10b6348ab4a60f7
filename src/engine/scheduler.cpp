#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common.h"

namespace strata::engine {

void Channel::push(TokenEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    q_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<TokenEvent> Channel::pop(int timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !q_.empty(); })) return std::nullopt;
  TokenEvent e = std::move(q_.front());
  q_.pop_front();
  return e;
}

kv::Config Scheduler::kv_config(const model::Model& m, const SchedulerOptions& o) {
  const int cached = o.prefix_cache < 0 ? o.n_parallel : o.prefix_cache;
  return m.kv_config(o.n_ctx * (o.n_parallel + cached), o.kv_format, o.kv_resident, o.kv_spill);
}

Scheduler::Scheduler(const model::Model& m, const tok::Tokenizer& tk, const SchedulerOptions& o) : model_(m), tk_(tk), opt_(o) {
  if (o.n_parallel <= 0 || o.n_ctx <= 0) throw Error("--parallel and --ctx must be positive");
  cache_max_ = o.prefix_cache < 0 ? o.n_parallel : o.prefix_cache;
  kv_ = std::make_unique<kv::KvStore>(kv_config(m, o));
  pool_ = std::make_unique<ThreadPool>(o.n_threads > 0 ? o.n_threads : ThreadPool::default_threads());
  slots_.resize(o.n_parallel);
  stats_.n_parallel = o.n_parallel;
  stats_.kv_bytes_capacity = kv_->backing_capacity_bytes();
  stats_.kv_description = kv_->describe();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::submit(GenRequest r) {
  if (r.prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int>(r.prompt.size()) >= opt_.n_ctx)
    throw Error("the prompt has " + std::to_string(r.prompt.size()) + " tokens; the context of each sequence holds " +
                std::to_string(opt_.n_ctx) + " (prompt + generated tokens must fit)");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= model_.hparams().n_vocab) throw Error("token id " + std::to_string(t) + " is outside the vocabulary");
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (static_cast<int>(queue_.size()) >= opt_.max_queue) return false;
    queue_.push_back(std::move(r));
    ++stats_.requests;
  }
  cv_.notify_all();
  return true;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  SchedulerStats s = stats_;
  s.queued = static_cast<int>(queue_.size());
  return s;
}

void Scheduler::finish(Slot& s, const std::string& reason, const std::string& stop_sequence) {
  if (!s.pending.empty() && reason != "cancelled") {
    TokenEvent t;
    t.text = s.pending;  // nothing more can complete it
    s.req.out->push(t);
  }
  TokenEvent e;
  e.kind = TokenEvent::Done;
  e.finish_reason = reason;
  e.stop_sequence = stop_sequence;
  e.prompt_tokens = static_cast<int>(s.req.prompt.size());
  e.completion_tokens = s.generated;
  s.req.out->push(e);
  release(s);
}

std::vector<uint64_t> Scheduler::page_hashes(const std::vector<int32_t>& tokens, int page_size) {
  std::vector<uint64_t> out;
  uint64_t h = 1469598103934665603ull;  // FNV-1a, chained across pages
  for (size_t p = 0; p + page_size <= tokens.size(); p += page_size) {
    for (int i = 0; i < page_size; ++i) {
      uint32_t t = static_cast<uint32_t>(tokens[p + i]);
      for (int b = 0; b < 4; ++b) h = (h ^ ((t >> (8 * b)) & 0xFF)) * 1099511628211ull;
    }
    out.push_back(h);
  }
  return out;
}

void Scheduler::release(Slot& s) {
  // The cells the sequence holds: the prompt and every generated token but the last sampled one.
  std::vector<int32_t> held(s.req.prompt.begin(), s.req.prompt.begin() + std::min(s.fed, s.req.prompt.size()));
  held.insert(held.end(), s.generated_ids.begin(), s.generated_ids.end());
  held.resize(std::min<size_t>(held.size(), kv_->length(s.seq)));
  const int P = kv_->config().page_size;
  if (cache_max_ > 0 && static_cast<int>(held.size()) >= P) {
    if (static_cast<int>(cache_.size()) >= cache_max_) {  // evict the least recently used entry
      auto lru = std::min_element(cache_.begin(), cache_.end(), [](const Cached& a, const Cached& b) { return a.last_used < b.last_used; });
      kv_->free_sequence(lru->seq);
      cache_.erase(lru);
    }
    cache_.push_back({s.seq, held, page_hashes(held, P), ++cache_tick_});
  } else {
    kv_->free_sequence(s.seq);
  }
  s = Slot();
}

size_t Scheduler::prefix_cache_bytes() const {
  size_t bytes = 0;
  for (const auto& c : cache_)
    for (int l = 0; l < kv_->config().n_layers; ++l) bytes += static_cast<size_t>(kv_->n_pages(c.seq, l)) * kv_->page_bytes();
  return bytes;
}

int Scheduler::reuse_prefix(Slot& s) {
  const int P = kv_->config().page_size;
  auto want = page_hashes(s.req.prompt, P);
  Cached* best = nullptr;
  size_t best_pages = 0;
  for (auto& c : cache_) {
    size_t n = 0;
    while (n < want.size() && n < c.page_hashes.size() && want[n] == c.page_hashes[n]) ++n;
    // Hashes pick the candidate; the tokens themselves decide.
    while (n > 0 && !std::equal(s.req.prompt.begin(), s.req.prompt.begin() + n * P, c.tokens.begin())) --n;
    if (n > best_pages) {
      best_pages = n;
      best = &c;
    }
  }
  if (!best) return 0;
  // Whole pages, and at least one prompt token left to evaluate (its logits start the answer).
  int n = static_cast<int>(std::min(best_pages * P, s.req.prompt.size() - 1));
  n -= n % P;
  if (n <= 0) return 0;
  best->last_used = ++cache_tick_;
  kv_->copy_prefix(best->seq, s.seq, n);
  return n;
}

// Appends a sampled token's text, holding back what may still turn into a stop string or is an
// incomplete UTF-8 sequence. Returns via finish() when a stop string appears.
void Scheduler::emit(Slot& s, int32_t tok, const float* logits) {
  TokenEvent e;
  e.token = tok;
  if (s.req.top_logprobs >= 0) {
    const int V = model_.hparams().n_vocab;
    float mx = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    e.logprob = logits[tok] - lse;
    std::vector<int32_t> idx(V);
    for (int i = 0; i < V; ++i) idx[i] = i;
    int k = std::min(s.req.top_logprobs, V);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int i = 0; i < k; ++i) e.top.push_back({idx[i], logits[idx[i]] - lse});
  }
  s.pending += tk_.piece(tok);
  // Stop strings.
  for (const auto& st : s.req.stop) {
    if (st.empty()) continue;
    size_t at = s.pending.find(st);
    if (at != std::string::npos) {
      s.pending.resize(at);
      e.text = s.pending;
      s.pending.clear();
      if (!e.text.empty() || e.top.size()) s.req.out->push(e);
      finish(s, "stop", st);
      return;
    }
  }
  // Keep back a tail that could begin a stop string, and an incomplete UTF-8 sequence.
  size_t keep = 0;
  for (const auto& st : s.req.stop)
    for (size_t k = std::min(st.size() - 1, s.pending.size()); k > keep; --k)
      if (s.pending.compare(s.pending.size() - k, k, st, 0, k) == 0) {
        keep = k;
        break;
      }
  size_t cut = s.pending.size() - keep;
  for (size_t back = 1; back <= 4 && back <= cut; ++back) {
    unsigned char c = static_cast<unsigned char>(s.pending[cut - back]);
    if ((c & 0xC0) == 0x80) continue;
    if (c >= 0xC0 && tok::utf8_len(c) > static_cast<int>(back)) cut -= back;
    break;
  }
  e.text = s.pending.substr(0, cut);
  s.pending.erase(0, cut);
  s.req.out->push(e);
}

void Scheduler::loop() {
  const int V = model_.hparams().n_vocab;
  std::vector<float> logits;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        if (stop_ || !queue_.empty()) return true;
        for (auto& s : slots_) if (s.busy) return true;
        return false;
      });
      if (stop_) break;
      // Admit waiting requests into free slots (between steps, never inside one).
      for (auto& s : slots_) {
        if (s.busy || queue_.empty()) continue;
        s.busy = true;
        s.req = std::move(queue_.front());
        queue_.pop_front();
        s.seq = kv_->new_sequence();
        s.sampler = std::make_unique<Sampler>(s.req.sampling);
        for (int32_t t : s.req.prompt) s.sampler->accept(t);
        int reused = reuse_prefix(s);
        s.fed = static_cast<size_t>(reused);
        stats_.reused_tokens += static_cast<uint64_t>(reused);
      }
    }
    // Build one step: a prompt chunk for sequences still reading their prompt, one token for
    // the others. Cancelled requests are dropped here, freeing their cells.
    std::vector<model::Model::Part> parts;
    std::vector<Slot*> owners;
    int active = 0;
    for (auto& s : slots_) {
      if (!s.busy) continue;
      if (s.req.out->cancelled()) {
        finish(s, "cancelled");
        continue;
      }
      ++active;
      if (s.fed < s.req.prompt.size()) {
        int n = static_cast<int>(std::min<size_t>(opt_.prefill_chunk, s.req.prompt.size() - s.fed));
        parts.push_back({s.seq, s.req.prompt.data() + s.fed, n, false});
      } else {
        parts.push_back({s.seq, &s.last, 1, false});
      }
      owners.push_back(&s);
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.active = active;
      stats_.kv_bytes_in_use = kv_->bytes_in_use();
      stats_.kv_bytes_prefix_cache = prefix_cache_bytes();
    }
    if (parts.empty()) continue;
    logits.resize(parts.size() * static_cast<size_t>(V));
    auto t0 = std::chrono::steady_clock::now();
    try {
      model::Runtime rt{*kv_, *pool_};
      model_.forward_batch(rt, parts, logits.data());
    } catch (const std::exception& ex) {
      for (Slot* s : owners) {
        TokenEvent e;
        e.kind = TokenEvent::Failed;
        e.error = ex.what();
        s->req.out->push(e);
        kv_->free_sequence(s->seq);
        *s = Slot();
      }
      if (!cache_.empty()) {  // make room: drop the prefix cache
        for (auto& c : cache_) kv_->free_sequence(c.seq);
        cache_.clear();
      }
      continue;
    }
    int produced = 0;
    uint64_t prompt_tokens = 0;
    for (size_t i = 0; i < owners.size(); ++i) {
      Slot& s = *owners[i];
      if (s.fed < s.req.prompt.size()) {
        s.fed += parts[i].n;
        prompt_tokens += parts[i].n;
        if (s.fed < s.req.prompt.size()) continue;  // more prompt to read before sampling
      }
      const float* row = logits.data() + i * static_cast<size_t>(V);
      if (s.req.max_tokens == 0) {
        finish(s, "length");
        continue;
      }
      int32_t tok = s.sampler->sample(row, V);
      s.sampler->accept(tok);
      ++produced;
      if (!s.req.ignore_eos && tk_.is_eog(tok)) {
        finish(s, "stop");
        continue;
      }
      ++s.generated;
      if (s.last >= 0) s.generated_ids.push_back(s.last);  // the previous token is in the cache now
      s.last = tok;
      emit(s, tok, row);
      if (!s.busy) continue;  // a stop string ended it
      if (s.generated >= s.req.max_tokens) {
        finish(s, "length");
      } else if (kv_->length(s.seq) + 1 >= opt_.n_ctx) {
        finish(s, "length");  // the sequence's context is full
      }
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.steps;
    stats_.prompt_tokens += prompt_tokens;
    stats_.generated_tokens += produced;
    if (produced) stats_.generate_seconds += sec;
    stats_.kv_bytes_in_use = kv_->bytes_in_use();
    stats_.cached_sequences = static_cast<int>(cache_.size());
    stats_.kv_bytes_prefix_cache = prefix_cache_bytes();
  }
  for (auto& s : slots_)
    if (s.busy) finish(s, "cancelled");
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& r : queue_) {  // never admitted: tell their readers
    TokenEvent e;
    e.kind = TokenEvent::Failed;
    e.error = "the server is shutting down";
    r.out->push(e);
  }
  queue_.clear();
}

}  // namespace strata::engine
