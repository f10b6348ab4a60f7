// Tokenizers built from GGUF metadata: SentencePiece-style ("llama" model, byte fallback) and
// byte-level BPE ("gpt2" model, pre-tokenizer named by tokenizer.ggml.pre).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"

namespace strata::tok {

enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
enum class Kind { Spm, Bpe };

struct TokenData {
  std::string text;
  float score = 0;
  TokenType type = TokenType::Normal;
};

class Tokenizer {
 public:
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);
  virtual ~Tokenizer() = default;

  // add_bos: prepend BOS when the vocabulary asks for it. parse_special: text such as
  // "<|im_start|>" becomes its control token instead of being spelled out.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Bytes a token stands for (control tokens give "" unless show_special).
  std::string piece(int32_t id, bool show_special = false) const;
  // Whole-sequence detokenization (drops the SentencePiece leading space after BOS).
  std::string decode(const std::vector<int32_t>& ids, bool show_special = false) const;

  Kind kind() const { return kind_; }
  const std::string& pre() const { return pre_; }
  int n_vocab() const { return static_cast<int>(tokens_.size()); }
  const TokenData& token(int32_t id) const { return tokens_.at(id); }
  std::optional<int32_t> find(std::string_view text) const;
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  const std::optional<std::string>& chat_template() const { return chat_template_; }

 protected:
  Tokenizer() = default;
  // Tokenizes a fragment of plain text (no special tokens in it).
  virtual void encode_fragment(std::string_view text, bool first_fragment, std::vector<int32_t>& out) const = 0;
  virtual std::string token_bytes(int32_t id) const = 0;

  Kind kind_ = Kind::Spm;
  std::string pre_;
  std::vector<TokenData> tokens_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<int32_t> specials_;  // control / user-defined / unknown tokens, longest text first
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
  std::vector<int32_t> eog_;
  std::optional<std::string> chat_template_;

  friend std::unique_ptr<Tokenizer> make_spm(const gguf::File&);
  friend std::unique_ptr<Tokenizer> make_bpe(const gguf::File&);
  void load_common(const gguf::File& f);
};

std::unique_ptr<Tokenizer> make_spm(const gguf::File& f);
std::unique_ptr<Tokenizer> make_bpe(const gguf::File& f);

// Length of the UTF-8 sequence starting with byte c (1 for invalid lead bytes).
inline int utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace strata::tok
