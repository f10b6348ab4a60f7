// Vocabulary loading shared by both tokenizer kinds: tokens, types, special ids, special-token
// splitting and end-of-generation detection.
#include <algorithm>

#include "common.h"
#include "tokenizer/tokenizer.h"

namespace strata::tok {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) throw Error("the file has no tokenizer (missing 'tokenizer.ggml.model')");
  if (*model == "llama") return make_spm(f);
  if (*model == "gpt2") return make_bpe(f);
  throw Error("tokenizer model '" + *model + "' is not supported (supported: llama, gpt2)");
}

void Tokenizer::load_common(const gguf::File& f) {
  auto texts = f.get_string_array("tokenizer.ggml.tokens");
  if (texts.empty()) throw Error("missing metadata 'tokenizer.ggml.tokens'");
  auto scores = f.get_f32_array("tokenizer.ggml.scores");
  auto types = f.get_i32_array("tokenizer.ggml.token_type");
  if (!scores.empty() && scores.size() != texts.size()) throw Error("tokenizer.ggml.scores length differs from tokens");
  if (!types.empty() && types.size() != texts.size()) throw Error("tokenizer.ggml.token_type length differs from tokens");
  tokens_.resize(texts.size());
  index_.reserve(texts.size() * 2);
  for (size_t i = 0; i < texts.size(); ++i) {
    tokens_[i].text = std::string(texts[i]);
    tokens_[i].score = scores.empty() ? 0.f : scores[i];
    int32_t t = types.empty() ? 1 : types[i];
    tokens_[i].type = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Normal;
    index_.emplace(tokens_[i].text, static_cast<int32_t>(i));  // first wins on duplicates
  }
  auto id = [&](const char* k, int32_t fallback) -> int32_t {
    auto v = f.get_int(k);
    if (!v) return fallback;
    if (*v < 0 || *v >= static_cast<int64_t>(tokens_.size())) return -1;
    return static_cast<int32_t>(*v);
  };
  bos_ = id("tokenizer.ggml.bos_token_id", -1);
  eos_ = id("tokenizer.ggml.eos_token_id", -1);
  unk_ = id("tokenizer.ggml.unknown_token_id", -1);
  chat_template_ = f.get_string("tokenizer.chat_template");

  for (size_t i = 0; i < tokens_.size(); ++i) {
    auto t = tokens_[i].type;
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) && !tokens_[i].text.empty())
      specials_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].text.size() > tokens_[b].text.size(); });

  // End of generation: EOS, EOT, and the end-of-turn markers of common chat formats.
  auto add_eog = [&](int32_t t) {
    if (t >= 0 && std::find(eog_.begin(), eog_.end(), t) == eog_.end()) eog_.push_back(t);
  };
  add_eog(eos_);
  add_eog(id("tokenizer.ggml.eot_token_id", -1));
  add_eog(id("tokenizer.ggml.eom_token_id", -1));
  for (const char* s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "</s>"}) {
    auto it = index_.find(s);
    if (it != index_.end() && tokens_[it->second].type == TokenType::Control) add_eog(it->second);
  }
}

std::optional<int32_t> Tokenizer::find(std::string_view text) const {
  auto it = index_.find(std::string(text));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_eog(int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
  if (text.empty()) return out;
  // Split the text at special tokens: user-defined ones always, control ones when asked.
  bool first = true;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    int32_t best_id = -1;
    for (int32_t sid : specials_) {
      const auto& td = tokens_[sid];
      if (td.type != TokenType::UserDefined && !parse_special) continue;
      size_t at = text.find(td.text, pos);
      if (at < best) {  // earliest occurrence; longest first among equal starts (sorted)
        best = at;
        best_id = sid;
      }
    }
    size_t end = best == std::string_view::npos ? text.size() : best;
    if (end > pos) {
      encode_fragment(text.substr(pos, end - pos), first, out);
      first = false;
    }
    if (best_id < 0) break;
    out.push_back(best_id);
    first = true;  // text after a special token is tokenized as a fresh start
    pos = end + tokens_[best_id].text.size();
  }
  return out;
}

std::string Tokenizer::piece(int32_t id, bool show_special) const {
  if (id < 0 || id >= n_vocab()) throw Error("token id " + std::to_string(id) + " out of range");
  const auto& t = tokens_[id];
  if (t.type == TokenType::Control || t.type == TokenType::Unknown || t.type == TokenType::Unused)
    return show_special ? t.text : std::string();
  if (t.type == TokenType::UserDefined) return t.text;
  return token_bytes(id);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool show_special) const {
  std::string s;
  bool strip = kind_ == Kind::Spm && add_space_prefix_;
  for (int32_t id : ids) {
    std::string p = piece(id, show_special);
    if (strip && !p.empty()) {
      if (p[0] == ' ') p.erase(0, 1);
      strip = false;
    }
    s += p;
  }
  return s;
}

}  // namespace strata::tok
