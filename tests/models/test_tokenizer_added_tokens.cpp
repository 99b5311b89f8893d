// Added tokens and the post-processor on small hand-written tokenizers, ids worked out by hand:
// leftmost-longest matching, tokens with normalized=false matched before the others, lstrip and
// rstrip, special tokens in decode, the template around the sequence, bos/eos, and the
// tokenizer_config.json of a folder.
#include <doctest/doctest.h>

#include <fstream>

#include "error_message.h"
#include "temp_dir.h"
#include "tokenizer_test_helpers.h"

using namespace weft;
using tokenizer_test::TinyTokenizer;
using Ids = std::vector<int32_t>;

namespace {

std::string added(int id, const std::string& content, bool special, bool normalized, bool lstrip = false,
                  bool rstrip = false) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  return "{\"id\":" + std::to_string(id) + ",\"content\":\"" + content + "\",\"single_word\":false,\"lstrip\":" +
         b(lstrip) + ",\"rstrip\":" + b(rstrip) + ",\"normalized\":" + b(normalized) + ",\"special\":" + b(special) + "}";
}

}  // namespace

TEST_CASE("Added tokens match leftmost, then longest, before pre-tokenization") {
  TinyTokenizer t;
  t.added_tokens = "[" + added(256, "ab", false, false) + "," + added(257, "abc", false, false) + "," +
                   added(258, "bcd", false, false) + "]";
  const models::Tokenizer tok = t.load();
  CHECK(tok.encode("xabcd") == Ids{120, 257, 100});  // "abc" and "bcd" overlap: the leftmost wins
  CHECK(tok.encode("xabd") == Ids{120, 256, 100});
  CHECK(tok.encode("xbcd ab") == Ids{120, 258, 32, 256});  // " " is a word of its own
  CHECK(tok.encode("a b") == Ids{97, 32, 98});
}

TEST_CASE("Added tokens with normalized=false are matched before the others") {
  TinyTokenizer t;
  // "abc" would be leftmost, but "bc" is matched in the first pass.
  t.added_tokens = "[" + added(256, "bc", false, false) + "," + added(257, "abc", false, true) + "]";
  CHECK(t.load().encode("abcd") == Ids{97, 256, 100});
  CHECK(t.load().encode("abd abc") == Ids{97, 98, 100, 32, 97, 256});
  t.added_tokens = "[" + added(256, "bc", false, true) + "," + added(257, "abc", false, true) + "]";
  CHECK(t.load().encode("abcd") == Ids{257, 100});
}

TEST_CASE("Added tokens with lstrip and rstrip take the whitespace beside them") {
  TinyTokenizer t;
  t.added_tokens = "[" + added(256, "<m>", false, false) + "]";
  CHECK(t.load().encode("a  <m>  b") == Ids{97, 32, 32, 256, 32, 32, 98});  // "a", "  "; " ", " b"
  t.added_tokens = "[" + added(256, "<m>", false, false, true, false) + "]";
  CHECK(t.load().encode("a  <m>  b") == Ids{97, 256, 32, 32, 98});
  CHECK(t.load().encode("<m> <m>") == Ids{256, 256});
  t.added_tokens = "[" + added(256, "<m>", false, false, false, true) + "]";
  CHECK(t.load().encode("a  <m>  b") == Ids{97, 32, 32, 256, 98});
  CHECK(t.load().encode("<m>\t\u3000\nb") == Ids{256, 98});  // any Unicode whitespace
  t.added_tokens = "[" + added(256, "<m>", false, false, true, true) + "]";
  CHECK(t.load().encode("a  <m>  b") == Ids{97, 256, 98});
  // The search goes on after the match: the second token starts inside the whitespace the first
  // one's rstrip took, and its lstrip stops where the first one ended.
  t.added_tokens = "[" + added(256, " <m>", false, false, true, true) + "]";
  CHECK(t.load().encode("x <m> <m>y") == Ids{120, 256, 256, 121});
}

TEST_CASE("Special tokens are matched in the text either way and skipped by decode on request") {
  TinyTokenizer t;
  t.added_tokens = "[" + added(256, "<s>", true, false) + "," + added(257, "Ġx", false, false) + "]";
  const models::Tokenizer tok = t.load();
  CHECK(tok.encode("<s>a", false) == Ids{256, 97});
  CHECK(tok.encode("<s>a", true) == Ids{256, 97});  // no template: nothing added
  CHECK(tok.is_special(256));
  CHECK_FALSE(tok.is_special(257));
  CHECK_FALSE(tok.is_special(97));
  CHECK(tok.decode(Ids{256, 97, 256}) == "<s>a<s>");
  CHECK(tok.decode(Ids{256, 97, 256}, true) == "a");
  // Added tokens go through the ByteLevel decoder too: "Ġx" is " x".
  CHECK(tok.encode("aĠx") == Ids{97, 257});
  CHECK(tok.decode(Ids{97, 257}) == "a x");
  CHECK(tok.token_to_id("<s>") == 256);
  CHECK(tok.id_to_token(257) == "Ġx");
  CHECK(tok.vocab_size() == 258);
  CHECK(tok.bos_token_id() == std::nullopt);
  CHECK(tok.eos_token_id() == std::nullopt);
}

TEST_CASE("TemplateProcessing puts its special tokens around the sequence, and names bos and eos") {
  TinyTokenizer t;
  t.added_tokens = "[" + added(256, "<s>", true, false) + "," + added(257, "</s>", true, false) + "]";
  const std::string single =
      R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},)"
      R"({"SpecialToken":{"id":"</s>","type_id":0}}],"pair":[],"special_tokens":{"<s>":{"id":"<s>","ids":[256],"tokens":["<s>"]},)"
      R"("</s>":{"id":"</s>","ids":[257],"tokens":["</s>"]}}})";
  for (const std::string& post : {single, R"({"type":"Sequence","processors":[{"type":"ByteLevel","add_prefix_space":true,)"
                                            R"("trim_offsets":false,"use_regex":true},)" + single + "]}"}) {
    t.post_processor = post;
    const models::Tokenizer tok = t.load();
    CHECK(tok.encode("ab") == Ids{256, 97, 98, 257});
    CHECK(tok.encode("ab", false) == Ids{97, 98});
    CHECK(tok.encode("") == Ids{256, 257});
    CHECK(tok.bos_token_id() == 256);
    CHECK(tok.eos_token_id() == 257);
  }
  t.post_processor = R"({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})";
  CHECK(t.load().encode("ab") == Ids{97, 98});
}

TEST_CASE("Tokenizer::from_folder takes bos and eos from tokenizer_config.json") {
  test::TempDir dir;
  TinyTokenizer t;
  t.added_tokens = "[" + added(256, "<|endoftext|>", true, false) + "," + added(257, "<s>", true, false) + "]";
  std::ofstream(dir / "tokenizer.json") << t.json();
  CHECK(models::Tokenizer::from_folder(dir.path()).eos_token_id() == std::nullopt);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token":{"content":"<s>","lstrip":false},"eos_token":"<|endoftext|>","pad_token":null})";
  const models::Tokenizer tok = models::Tokenizer::from_folder(dir.path());
  CHECK(tok.bos_token_id() == 257);
  CHECK(tok.eos_token_id() == 256);
  CHECK(tok.encode("hi<|endoftext|>") == Ids{104, 105, 256});
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token":"</s>"})";
  CHECK(error_of([&] { models::Tokenizer::from_folder(dir.path()); }) ==
        "[Tokenizer] '" + (dir / "tokenizer_config.json").string() +
            "': eos_token: the token \"</s>\" is not in the tokenizer's vocabulary");
  CHECK(error_of([&] { models::Tokenizer::from_folder(dir / "missing"); })
            .find("[Tokenizer] '" + (dir / "missing" / "tokenizer.json").string() + "': cannot open") == 0);
}
