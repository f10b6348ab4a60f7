// SentencePiece-style tokenizer: spaces become U+2581, adjacent pieces merge greedily by the
// highest vocabulary score, and characters outside the vocabulary fall back to <0xXX> bytes.
#include <cstdio>
#include <map>
#include <queue>

#include "common.h"
#include "tokenizer/tokenizer.h"

namespace strata::tok {

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

class SpmTokenizer : public Tokenizer {
 public:
  explicit SpmTokenizer(const gguf::File& f) {
    kind_ = Kind::Spm;
    load_common(f);
    add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
    add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    if (bos_ < 0) bos_ = find("<s>").value_or(-1);
    if (eos_ < 0) eos_ = find("</s>").value_or(-1);
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      auto id = find(buf);
      if (!id) id = find(std::string(1, static_cast<char>(b)));
      byte_token_[b] = id.value_or(-1);
    }
  }

 protected:
  struct Symbol {
    int prev, next;
    const char* text;
    size_t n;
  };
  struct Bigram {
    int left, right;
    float score;
    size_t size;
    bool operator<(const Bigram& o) const {  // priority: higher score, then leftmost
      return score < o.score || (score == o.score && left > o.left);
    }
  };

  void encode_fragment(std::string_view frag, bool first, std::vector<int32_t>& out) const override {
    std::string text;
    if (add_space_prefix_ && first) text = kSpace;
    for (char c : frag) {
      if (c == ' ')
        text += kSpace;
      else
        text += c;
    }
    std::vector<Symbol> sym;
    for (size_t off = 0; off < text.size();) {
      size_t len = std::min<size_t>(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
      sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, text.data() + off, len});
      off += len;
    }
    if (sym.empty()) return;
    sym.back().next = -1;
    std::priority_queue<Bigram> queue;
    std::map<std::string, std::pair<int, int>> rev_merge;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      std::string s(sym[l].text, sym[l].n + sym[r].n);
      auto it = index_.find(s);
      if (it == index_.end()) return;
      queue.push({l, r, tokens_[it->second].score, s.size()});
      rev_merge[s] = {l, r};
    };
    for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!queue.empty()) {
      Bigram bg = queue.top();
      queue.pop();
      Symbol& l = sym[bg.left];
      Symbol& r = sym[bg.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale: one side already merged
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = bg.left;
      try_add(l.prev, bg.left);
      try_add(bg.left, l.next);
    }
    for (int i = 0; i >= 0; i = sym[i].next) resegment(sym, sym[i], rev_merge, out);
  }

  void resegment(const std::vector<Symbol>& sym, const Symbol& s, const std::map<std::string, std::pair<int, int>>& rev,
                 std::vector<int32_t>& out) const {
    std::string text(s.text, s.n);
    auto it = index_.find(text);
    if (it != index_.end()) {
      out.push_back(it->second);
      return;
    }
    auto m = rev.find(text);
    if (m != rev.end()) {
      resegment(sym, sym[m->second.first], rev, out);
      resegment(sym, sym[m->second.second], rev, out);
      return;
    }
    for (unsigned char c : text) {
      int32_t id = byte_token_[c] >= 0 ? byte_token_[c] : unk_;
      if (id >= 0) out.push_back(id);
    }
  }

  std::string token_bytes(int32_t id) const override {
    const auto& t = tokens_[id];
    // "<0xHH>" with two hex digits; a byte token spelled otherwise (a hostile file) is plain text.
    if (t.type == TokenType::Byte && t.text.size() == 6 && t.text.rfind("<0x", 0) == 0 && t.text[5] == '>') {
      const int hi = hex_digit(t.text[3]), lo = hex_digit(t.text[4]);
      if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
    }
    std::string s;
    for (size_t i = 0; i < t.text.size();) {
      if (t.text.compare(i, 3, kSpace) == 0) {
        s += ' ';
        i += 3;
      } else {
        s += t.text[i++];
      }
    }
    return s;
  }

 private:
  int32_t byte_token_[256];
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm(const gguf::File& f) { return std::unique_ptr<Tokenizer>(new SpmTokenizer(f)); }

}  // namespace strata::tok
