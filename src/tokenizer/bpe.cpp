// Byte-level BPE: the pre-tokenizer regexes named by tokenizer.ggml.pre split the text, each
// piece is mapped byte-by-byte to printable code points (GPT-2's table), then adjacent symbols
// merge by the rank of tokenizer.ggml.merges.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <queue>
#include <unordered_map>

#include "common.h"
#include "tokenizer/tokenizer.h"

namespace strata::tok {

namespace {

// Pre-tokenizer expressions, applied in order; each splits every current piece into its matches
// and the gaps between them.
struct PreTokenizer {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a whole piece that is a token is emitted as is
};

PreTokenizer pre_tokenizer_for(const std::string& pre) {
  const std::string contractions_ci = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  const std::string gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3")
    return {{contractions_ci + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, true};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen")
    return {{contractions_ci + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false};
  if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "jina-es" || pre == "jina-de" || pre == "roberta-bpe")
    return {{gpt2}, false};
  if (pre.empty() || pre == "default")
    return {{"[\\p{P}\\$\\+<=>\\^~\\|]+", gpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false};
  throw Error("BPE pre-tokenizer '" + pre + "' is not supported (supported: default, gpt-2, llama-bpe/llama3, qwen2)");
}

class Regex {
 public:
  explicit Regex(const std::string& pattern) {
    int err;
    PCRE2_SIZE off;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("pre-tokenizer regex does not compile: " + std::string(reinterpret_cast<char*>(msg)));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional speed-up; matching works without it
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends [start, end) ranges of matches and gaps covering [b, e) of text.
  void split(std::string_view text, size_t b, size_t e, std::vector<std::pair<size_t, size_t>>& out) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t pos = b;
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    while (pos < e) {
      int rc = pcre2_match(code_, subject, e, pos, 0, md, nullptr);
      if (rc < 0) break;
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t ms = ov[0], me = ov[1];
      if (me == ms) {  // empty match: step one character
        ++pos;
        while (pos < e && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (ms > b) out.push_back({b, ms});
      out.push_back({ms, me});
      b = pos = me;
    }
    if (b < e) out.push_back({b, e});
    pcre2_match_data_free(md);
  }

 private:
  pcre2_code* code_ = nullptr;
};

// GPT-2's reversible map from bytes to printable code points, as UTF-8 strings.
struct ByteMap {
  std::string to_utf8[256];
  std::unordered_map<uint32_t, uint8_t> from_cp;
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      from_cp[cp] = static_cast<uint8_t>(b);
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      to_utf8[b] = s;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(const gguf::File& f) {
    kind_ = Kind::Bpe;
    load_common(f);
    pre_ = f.get_string("tokenizer.ggml.pre").value_or("default");
    auto cfg = pre_tokenizer_for(pre_);
    ignore_merges_ = cfg.ignore_merges;
    for (auto& r : cfg.regexes) regexes_.push_back(std::make_unique<Regex>(r));
    add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (merges.empty()) throw Error("BPE vocabulary has no 'tokenizer.ggml.merges'");
    ranks_.reserve(merges.size() * 2);
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string m(merges[i]);
      size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) throw Error("bad BPE merge #" + std::to_string(i) + ": '" + m + "'");
      ranks_.emplace(m, static_cast<int>(i));
    }
  }

 protected:
  void encode_fragment(std::string_view text, bool, std::vector<int32_t>& out) const override {
    std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}}, next;
    for (const auto& re : regexes_) {
      next.clear();
      for (auto [b, e] : pieces) re->split(text, b, e, next);
      pieces.swap(next);
    }
    const ByteMap& bm = byte_map();
    for (auto [b, e] : pieces) {
      std::string word;
      for (size_t i = b; i < e; ++i) word += bm.to_utf8[static_cast<unsigned char>(text[i])];
      encode_word(word, out);
    }
  }

  void encode_word(const std::string& word, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
      auto it = index_.find(word);
      if (it != index_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    struct Sym { int prev, next; size_t off, n; };
    std::vector<Sym> sym;
    for (size_t off = 0; off < word.size();) {
      size_t len = std::min<size_t>(utf8_len(static_cast<unsigned char>(word[off])), word.size() - off);
      sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, off, len});
      off += len;
    }
    if (sym.empty()) return;
    sym.back().next = -1;
    struct Bigram {
      int left, right, rank;
      std::string text;
      bool operator<(const Bigram& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
    };
    std::priority_queue<Bigram> queue;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      std::string key = word.substr(sym[l].off, sym[l].n) + " " + word.substr(sym[r].off, sym[r].n);
      auto it = ranks_.find(key);
      if (it == ranks_.end()) return;
      queue.push({l, r, it->second, word.substr(sym[l].off, sym[l].n + sym[r].n)});
    };
    for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!queue.empty()) {
      Bigram bg = queue.top();
      queue.pop();
      Sym& l = sym[bg.left];
      Sym& r = sym[bg.right];
      if (l.n == 0 || r.n == 0 || l.next != bg.right || l.n + r.n != bg.text.size()) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = bg.left;
      try_add(l.prev, bg.left);
      try_add(bg.left, l.next);
    }
    for (int i = 0; i >= 0; i = sym[i].next) {
      std::string s = word.substr(sym[i].off, sym[i].n);
      auto it = index_.find(s);
      if (it != index_.end()) {
        out.push_back(it->second);
        continue;
      }
      for (size_t k = 0; k < s.size();) {  // unknown merge result: fall back to single symbols
        size_t len = std::min<size_t>(utf8_len(static_cast<unsigned char>(s[k])), s.size() - k);
        auto jt = index_.find(s.substr(k, len));
        if (jt != index_.end()) out.push_back(jt->second);
        k += len;
      }
    }
  }

  std::string token_bytes(int32_t id) const override {
    const std::string& t = tokens_[id].text;
    const ByteMap& bm = byte_map();
    std::string s;
    for (size_t i = 0; i < t.size();) {
      unsigned char c = static_cast<unsigned char>(t[i]);
      int len = std::min<int>(utf8_len(c), static_cast<int>(t.size() - i));
      uint32_t cp = c;
      if (len == 2) cp = ((c & 0x1F) << 6) | (t[i + 1] & 0x3F);
      else if (len == 3) cp = ((c & 0x0F) << 12) | ((t[i + 1] & 0x3F) << 6) | (t[i + 2] & 0x3F);
      else if (len == 4) cp = ((c & 0x07) << 18) | ((t[i + 1] & 0x3F) << 12) | ((t[i + 2] & 0x3F) << 6) | (t[i + 3] & 0x3F);
      auto it = bm.from_cp.find(cp);
      if (it != bm.from_cp.end())
        s += static_cast<char>(it->second);
      else
        s.append(t, i, len);  // not a byte-level symbol: keep the text
      i += len;
    }
    return s;
  }

 private:
  std::vector<std::unique_ptr<Regex>> regexes_;
  std::unordered_map<std::string, int> ranks_;
  bool ignore_merges_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe(const gguf::File& f) { return std::unique_ptr<Tokenizer>(new BpeTokenizer(f)); }

}  // namespace strata::tok
