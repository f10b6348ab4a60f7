// The engine thread: owns the KV store and every sequence, and steps all active requests
// together (continuous batching). Server threads never touch the model; they submit native
// requests and read events from a channel.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace strata::engine {

struct TokenEvent {
  enum Kind { Text, Done, Failed } kind = Text;
  std::string text;  // a piece of the answer (complete UTF-8, stop strings removed)
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top alternatives with their logprobs
  std::string finish_reason;                   // Done: "stop" or "length"
  std::string stop_sequence;                   // Done: the stop string that ended the text, if any
  int prompt_tokens = 0, completion_tokens = 0;
  std::string error;
};

// One request's event stream: the engine pushes, one server thread pops.
class Channel {
 public:
  void push(TokenEvent e);
  // Waits up to timeout_ms; nullopt on timeout.
  std::optional<TokenEvent> pop(int timeout_ms);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> q_;
  std::atomic<bool> cancelled_{false};
};

struct GenRequest {
  std::vector<int32_t> prompt;
  SamplerParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int top_logprobs = -1;  // < 0: no logprobs
  std::shared_ptr<Channel> out = std::make_shared<Channel>();
};

struct SchedulerOptions {
  int n_parallel = 4;    // sequences decoded together
  int n_ctx = 4096;      // cells per sequence
  int max_queue = 64;    // waiting requests beyond which submit() refuses
  int prefill_chunk = 128;  // prompt tokens a sequence feeds per step, so running streams keep flowing
  int prefix_cache = -1;    // finished sequences kept for prefix reuse (-1: as many as --parallel)
  int n_threads = 0;
  kv::Format kv_format = kv::Format::F16;
  int kv_resident = 0;
  std::string kv_spill;
};

struct SchedulerStats {
  int active = 0, queued = 0, n_parallel = 0;
  uint64_t requests = 0, prompt_tokens = 0, generated_tokens = 0, steps = 0;
  uint64_t reused_tokens = 0;  // prompt tokens whose cells came from the prefix cache
  int cached_sequences = 0;
  double generate_seconds = 0;  // wall time of steps that produced tokens
  size_t kv_bytes_in_use = 0, kv_bytes_capacity = 0, kv_bytes_prefix_cache = 0;
  std::string kv_description;
};

class Scheduler {
 public:
  Scheduler(const model::Model& m, const tok::Tokenizer& tk, const SchedulerOptions& o);
  // The KV store the scheduler makes for these options (room for every active and cached sequence).
  static kv::Config kv_config(const model::Model& m, const SchedulerOptions& o);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; false when the queue is full. Throws on a prompt that cannot fit.
  bool submit(GenRequest r);
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return opt_; }

 private:
  struct Slot {
    bool busy = false;
    GenRequest req;
    kv::SeqId seq = -1;
    size_t fed = 0;           // prompt tokens in the cache
    int32_t last = -1;        // sampled token not yet in the cache
    int generated = 0;
    std::vector<int32_t> generated_ids;  // generated tokens already in the cache
    std::string pending;      // decoded text held back (incomplete UTF-8 / possible stop prefix)
    std::unique_ptr<Sampler> sampler;
  };
  // Prefix cache: finished sequences whose cells new requests may copy. Pages are matched by a
  // hash chain over their tokens (page i's hash covers tokens [0, 16 (i + 1))).
  struct Cached {
    kv::SeqId seq;
    std::vector<int32_t> tokens;  // the cells the sequence holds
    std::vector<uint64_t> page_hashes;
    uint64_t last_used;
  };
  static std::vector<uint64_t> page_hashes(const std::vector<int32_t>& tokens, int page_size);
  void release(Slot& s);         // keeps the sequence in the prefix cache, or frees it
  int reuse_prefix(Slot& s);     // copies the longest cached prefix into s; returns its length
  size_t prefix_cache_bytes() const;
  void loop();
  void finish(Slot& s, const std::string& reason, const std::string& stop_sequence = "");
  void emit(Slot& s, int32_t tok, const float* logits);

  const model::Model& model_;
  const tok::Tokenizer& tk_;
  SchedulerOptions opt_;
  std::unique_ptr<kv::KvStore> kv_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<Slot> slots_;
  std::vector<Cached> cache_;
  uint64_t cache_tick_ = 0;
  int cache_max_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenRequest> queue_;
  bool stop_ = false;
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace strata::engine
