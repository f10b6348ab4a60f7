// Tokenizer vectors from ../shared/tokenizer: every case of every vocabulary must match.
#include <gtest/gtest.h>

#include <sstream>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases(const std::string& vocab) {
  std::string base = test::shared_dir() + "/tokenizer/ggml-vocab-" + vocab + ".gguf";
  std::string inp = test::read_file(base + ".inp"), out = test::read_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t at; (at = inp.find(sep, pos)) != std::string::npos; pos = at + sep.size()) texts.push_back(inp.substr(pos, at - pos));
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (auto& t : texts) {
    std::getline(lines, line);
    Case c{t, {}};
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(c);
  }
  return cases;
}

class TokenizerVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectors, MatchReferenceIds) {
  auto f = gguf::File::open(test::shared_dir() + "/tokenizer/ggml-vocab-" + GetParam() + ".gguf");
  auto tk = tok::Tokenizer::from_gguf(*f);
  auto cases = load_cases(GetParam());
  ASSERT_EQ(cases.size(), 46u);
  int failures = 0;
  for (const auto& c : cases) {
    auto got = tk->encode(c.text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, c.ids) << "text: [" << c.text << "]";
    failures += got != c.ids;
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerVectors, DecodeRoundTrip) {
  auto f = gguf::File::open(test::shared_dir() + "/tokenizer/ggml-vocab-" + GetParam() + ".gguf");
  auto tk = tok::Tokenizer::from_gguf(*f);
  for (const auto& c : load_cases(GetParam())) {
    std::string text = tk->decode(c.ids);
    // SentencePiece drops the one space it added in front; everything else is byte-exact.
    if (tk->kind() == tok::Kind::Spm && !c.text.empty() && c.text[0] == ' ' && text == c.text.substr(1)) continue;
    EXPECT_EQ(text, c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocab, TokenizerVectors, ::testing::Values("llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2"));

TEST(Tokenizer, Stories260KPromptIds) {
  auto f = gguf::File::open(test::model_path("stories260K"));
  auto tk = tok::Tokenizer::from_gguf(*f);
  auto ids = tk->encode("Once upon a time, there was a little girl named Lily.", true, false);
  std::vector<int32_t> want = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  EXPECT_EQ(ids, want);
}

// A byte token whose text is not "<0xHH>" (a hostile or broken file) decodes as its text; it
// used to throw std::invalid_argument out of decode (found by fuzz_gguf).
TEST(Tokenizer, MalformedByteTokensDecodeAsText) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x41>", "<0xZZ>", "<0x4G>", "<0x-1>", "<0x7f>", "<0x41]"});
  w.set_f32_array("tokenizer.ggml.scores", std::vector<float>(9, 0.f));
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 6, 6, 6, 6});
  auto f = gguf::File::from_bytes(w.to_bytes());
  auto tk = tok::Tokenizer::from_gguf(*f);
  EXPECT_EQ(tk->decode({3}), "A");
  EXPECT_EQ(tk->decode({7}), "\x7f");
  EXPECT_EQ(tk->decode({4}), "<0xZZ>");
  EXPECT_EQ(tk->decode({5}), "<0x4G>");
  EXPECT_EQ(tk->decode({6}), "<0x-1>");
  EXPECT_EQ(tk->decode({8}), "<0x41]");
}

TEST(Tokenizer, SpecialTokensParsedOnlyWhenAsked) {
  auto f = gguf::File::open(test::shared_dir() + "/tokenizer/ggml-vocab-qwen2.gguf");
  auto tk = tok::Tokenizer::from_gguf(*f);
  auto im_start = tk->find("<|im_start|>");
  ASSERT_TRUE(im_start.has_value());
  auto with = tk->encode("<|im_start|>user", false, true);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with[0], *im_start);
  auto without = tk->encode("<|im_start|>user", false, false);
  EXPECT_NE(without[0], *im_start);
  EXPECT_TRUE(tk->is_eog(*tk->find("<|im_end|>")));
}

TEST(ChatTemplate, DetectsFormats) {
  EXPECT_EQ(tok::detect_chat_template(std::string("{{'<|im_start|>' + role}}"), "qwen2").format, tok::ChatFormat::ChatML);
  EXPECT_EQ(tok::detect_chat_template(std::string("<start_of_turn>"), "x").format, tok::ChatFormat::Gemma);
  EXPECT_EQ(tok::detect_chat_template(std::string("<|start_header_id|>"), "x").format, tok::ChatFormat::Llama3);
  EXPECT_EQ(tok::detect_chat_template(std::string("[INST]"), "x").format, tok::ChatFormat::Llama2);
  auto unknown = tok::detect_chat_template(std::string("{{ weird }}"), "llama");
  EXPECT_FALSE(unknown.recognised);
  EXPECT_NE(unknown.note.find("not recognised"), std::string::npos);
  EXPECT_EQ(tok::detect_chat_template(std::nullopt, "gemma3").format, tok::ChatFormat::Gemma);
}

TEST(ChatTemplate, RendersTurns) {
  std::vector<tok::Message> msgs = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tok::apply_chat_template(tok::ChatFormat::ChatML, msgs, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tok::apply_chat_template(tok::ChatFormat::Gemma, msgs, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(tok::apply_chat_template(tok::ChatFormat::Llama3, msgs, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(tok::apply_chat_template(tok::ChatFormat::Llama2, msgs, true), "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  EXPECT_THROW(tok::apply_chat_template(tok::ChatFormat::ChatML, {{"robot", "x"}}, true), std::runtime_error);
}

// Qwen3's template marks thinking with <think> and switches it with enable_thinking.
const char* kThinkingTemplate =
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}";

TEST(ChatTemplate, ThinkingSwitchAndHistory) {
  auto ct = tok::detect_chat_template(std::string(kThinkingTemplate), "qwen3");
  EXPECT_TRUE(ct.thinking);
  EXPECT_FALSE(tok::detect_chat_template(std::string("{{'<|im_start|>' + role}}"), "qwen2").thinking);
  std::vector<tok::Message> msgs = {{"user", "Hi"}, {"assistant", "<think>\nplanning\n</think>\n\nHello!"}, {"user", "Again"}};
  const std::string turns = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                            "<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(tok::apply_chat_template(ct.format, msgs, true, {true, true}), turns);
  EXPECT_EQ(tok::apply_chat_template(ct.format, msgs, true, {true, false}), turns + "<think>\n\n</think>\n\n");
  // Templates without thinking keep assistant text as it is.
  EXPECT_NE(tok::apply_chat_template(ct.format, msgs, true).find("planning"), std::string::npos);
}

// Every way of cutting the text into pieces gives the same thinking and answer.
TEST(ReasoningSplitter, SplitsWhateverThePieces) {
  struct Case {
    std::string text, reasoning, content;
  };
  const std::vector<Case> cases = {
      {"<think>\nLet me see.\n</think>\n\nBlue.", "Let me see.", "Blue."},
      {"\n<think>a < b </thinkish> c</think>Done", "a < b </thinkish> c", "Done"},
      {"Plain answer <think> not at the start", "", "Plain answer <think> not at the start"},
      {"<think>never closed, out of tokens", "never closed, out of tokens", ""},
      {"<thi", "", "<thi"},
      {"<think>\n\n</think>\n\nAnswer\n", "", "Answer\n"},
      {"", "", ""},
  };
  for (const auto& c : cases) {
    for (size_t piece = 1; piece <= c.text.size() + 1; ++piece) {
      tok::ReasoningSplitter sp;
      std::string r, a;
      for (size_t i = 0; i < c.text.size(); i += piece) {
        auto p = sp.push(c.text.substr(i, piece));
        r += p.reasoning;
        a += p.content;
      }
      auto p = sp.finish();
      r += p.reasoning;
      a += p.content;
      EXPECT_EQ(r, c.reasoning) << c.text << " / pieces of " << piece;
      EXPECT_EQ(a, c.content) << c.text << " / pieces of " << piece;
    }
  }
}

}  // namespace
