// What the tokenizer refuses, and the exact errors: components it does not implement (by name),
// malformed, truncated or inconsistent files (naming the key), text that is not UTF-8 and ids
// that name no token.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "error_message.h"
#include "tokenizer_test_helpers.h"

using namespace weft;
using tokenizer_test::replaced;
using tokenizer_test::TinyTokenizer;

namespace {

std::string error_loading(const TinyTokenizer& t) {
  return error_of([&] { t.load(); });
}

}  // namespace

TEST_CASE("Tokenizer refuses the components it does not implement, by name") {
  const std::string p = "[Tokenizer] 'tiny': ";
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    TinyTokenizer t;
    t.model_type = type;
    CHECK(error_loading(t) == p + "model type '" + type + "' is not supported (supported: BPE with a ByteLevel pre-tokenizer)");
  }
  TinyTokenizer t;
  t.normalizer = R"({"type":"NFC"})";
  CHECK(error_loading(t) == p + "normalizer type 'NFC' is not supported (supported: none)");
  t = TinyTokenizer();
  t.normalizer = R"({"type":"Sequence","normalizers":[]})";  // an empty sequence is no normalizer
  CHECK(error_loading(t).empty());
  t.pre_tokenizer = R"({"type":"Metaspace","replacement":"▁"})";
  CHECK(error_loading(t) == p + "pre_tokenizer type 'Metaspace' is not supported (supported: ByteLevel, or a Sequence "
                                "of Split (GPT-2's or Llama 3's pattern) and ByteLevel)");
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"ByteLevel"}]})";
  CHECK(error_loading(t) == p + "pre_tokenizer.pretokenizers[0]: type 'Whitespace' is not supported (supported: "
                                "ByteLevel, or a Sequence of Split (GPT-2's or Llama 3's pattern) and ByteLevel)");
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel"}]})";
  CHECK(error_loading(t) == p + "pre_tokenizer.pretokenizers[0].pattern.Regex: the Split pattern '\\w+' is not "
                                "supported (supported: GPT-2's and Llama 3's)");
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":" "},"behavior":"Isolated","invert":false},{"type":"ByteLevel"}]})";
  CHECK(error_loading(t) == p + "pre_tokenizer.pretokenizers[0].pattern: only a Regex pattern is supported (GPT-2's or Llama 3's)");
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":")"
                    R"('s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},"behavior":"Removed","invert":false},{"type":"ByteLevel"}]})";
  CHECK(error_loading(t) == p + "pre_tokenizer.pretokenizers[0].behavior: Split behavior 'Removed' is not supported (supported: Isolated)");
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[]})";
  CHECK(error_loading(t) == p + "pre_tokenizer.pretokenizers: a Sequence of pre-tokenizers must end with ByteLevel (the byte-level mapping)");
  t.pre_tokenizer = "null";
  CHECK(error_loading(t) == p + "pre_tokenizer null is not supported (supported: ByteLevel, or a Sequence of Split "
                                "(GPT-2's or Llama 3's pattern) and ByteLevel)");
  t = TinyTokenizer();
  t.decoder = R"({"type":"WordPiece","prefix":"##"})";
  CHECK(error_loading(t) == p + "decoder type 'WordPiece' is not supported (supported: ByteLevel)");
  t.decoder = "null";
  CHECK(error_loading(t) == p + "decoder null is not supported (supported: ByteLevel)");
  t = TinyTokenizer();
  t.post_processor = R"({"type":"RobertaProcessing"})";
  CHECK(error_loading(t) == p + "post_processor: type 'RobertaProcessing' is not supported (supported: ByteLevel, TemplateProcessing)");
  t = TinyTokenizer();
  t.model_fields = replaced(t.model_fields, R"("byte_fallback":false)", R"("byte_fallback":true)");
  CHECK(error_loading(t) == p + "model BPE with byte_fallback=true (SentencePiece-style, as Llama 2's) is not supported "
                                "(supported: BPE with a ByteLevel pre-tokenizer)");
  t = TinyTokenizer();
  t.model_fields = replaced(t.model_fields, R"("dropout":null)", R"("dropout":0.1)");
  CHECK(error_loading(t) == p + "model.dropout: dropout 0.1 is not supported (encoding would be random)");
  t.model_fields = replaced(t.model_fields, R"("dropout":0.1)", R"("dropout":0.0)");
  CHECK(error_loading(t).empty());
  t.model_fields = replaced(t.model_fields, R"("continuing_subword_prefix":null)", R"("continuing_subword_prefix":"##")");
  CHECK(error_loading(t) == p + "model.continuing_subword_prefix: '##' is not supported (byte-level BPE has none)");
  t = TinyTokenizer();
  t.root_extra = R"(,"extra":1)";  // unknown root keys are ignored, as the library does
  CHECK(error_loading(t).empty());
  t.added_tokens = R"([{"id":256,"content":"<m>","single_word":true,"lstrip":false,"rstrip":false,"normalized":false,"special":false}])";
  CHECK(error_loading(t) == p + "added_tokens[0].single_word: single_word=true is not supported (added token \"<m>\")");
}

TEST_CASE("Tokenizer refuses truncation, padding and unknown versions") {
  TinyTokenizer t;
  std::string json = replaced(t.json(), R"("truncation":null)", R"("truncation":{"max_length":512})");
  CHECK(error_of([&] { models::Tokenizer::from_json(json, "x"); }) == "[Tokenizer] 'x': truncation is not supported (it must be null)");
  json = replaced(t.json(), R"("padding":null)", R"("padding":{"strategy":"BatchLongest"})");
  CHECK(error_of([&] { models::Tokenizer::from_json(json, "x"); }) == "[Tokenizer] 'x': padding is not supported (it must be null)");
  json = replaced(t.json(), R"("version":"1.0")", R"("version":"2.0")");
  CHECK(error_of([&] { models::Tokenizer::from_json(json, "x"); }) ==
        "[Tokenizer] 'x': version: unknown tokenizer.json version '2.0' (supported: 1.0)");
}

TEST_CASE("Tokenizer names the key that is missing, mistyped or inconsistent") {
  const std::string p = "[Tokenizer] 'tiny': ";
  TinyTokenizer t;
  CHECK(error_of([&] { models::Tokenizer::from_json(R"({"version":"1.0"})", "tiny"); }) == p + "the key 'model' is missing");
  CHECK(error_of([&] { models::Tokenizer::from_json("[]", "tiny"); }) == p + "expected an object, got an array");
  CHECK(error_of([&] { models::Tokenizer::from_json(replaced(t.json(), R"("type":"BPE",)", ""), "tiny"); }) ==
        p + "the key 'model.type' is missing");
  CHECK(error_of([&] { models::Tokenizer::from_json(replaced(t.json(), R"(,"merges":[])", ""), "tiny"); }) ==
        p + "the key 'model.merges' is missing");
  t.merges = R"(["a b"])";
  CHECK(error_loading(t) == p + "model.merges[0]: the merge names \"ab\", which is not in model.vocab");
  t.merges = R"(["a zz"])";
  CHECK(error_loading(t) == p + "model.merges[0]: the merge names \"zz\", which is not in model.vocab");
  t.merges = R"(["ab"])";
  CHECK(error_loading(t) == p + "model.merges[0]: expected two tokens separated by one space, got \"ab\"");
  t.merges = R"([["a","b","c"]])";
  CHECK(error_loading(t) == p + "model.merges[0]: expected a string \"a b\" or a pair [\"a\", \"b\"], got an array");
  t.merges = R"([["a",1]])";
  CHECK(error_loading(t) == p + "model.merges[0][1]: expected a string, got a number");
  t.merges = "{}";
  CHECK(error_loading(t) == p + "model.merges: expected an array, got an object");
  t = TinyTokenizer();
  t.extra_vocab = R"(,"ab":97)";
  CHECK(error_loading(t) == p + "model.vocab: the id 97 is given to both \"a\" and \"ab\"");
  t.extra_vocab = R"(,"ab":-1)";
  CHECK(error_loading(t) == p + "model.vocab[\"ab\"]: the id -1 is out of range");
  t.extra_vocab = R"(,"ab":1.5)";
  CHECK(error_loading(t) == p + "model.vocab[\"ab\"]: expected an integer id, got a number");
  t.extra_vocab = R"(,"ab":100000)";
  CHECK(error_loading(t) == p + "model.vocab: ids run to 100000 for only 257 tokens; a vocabulary this sparse is not supported");
  t = TinyTokenizer();
  t.added_tokens = R"([{"id":5,"content":"<m>"}])";
  CHECK(error_loading(t) == p + "added_tokens[0]: the added token \"<m>\" has id 5, which model.vocab gives \"\u0105\"");
  t.added_tokens = R"([{"id":300,"content":"a"}])";
  CHECK(error_loading(t) == p + "added_tokens[0]: the added token \"a\" has id 300 but model.vocab gives it 97");
  t.added_tokens = R"([{"id":300,"content":"<m>"},{"id":300,"content":"<n>"}])";
  CHECK(error_loading(t) == p + "added_tokens[1]: the id 300 is given to two added tokens");
  t.added_tokens = R"([{"id":300,"content":"<m>"},{"id":301,"content":"<m>"}])";
  CHECK(error_loading(t) == p + "added_tokens[1]: the added token \"<m>\" is listed twice");
  t.added_tokens = R"([{"content":"<m>"}])";
  CHECK(error_loading(t) == p + "the key 'added_tokens[0].id' is missing");
  t.added_tokens = R"([{"id":300,"content":""}])";
  CHECK(error_loading(t) == p + "added_tokens[0].content: an added token may not be empty");
  t.added_tokens = R"([{"id":300,"content":"<m>","special":"yes"}])";
  CHECK(error_loading(t) == p + "added_tokens[0].special: expected true or false, got a string");
  t = TinyTokenizer();
  t.model_fields = replaced(t.model_fields, R"("unk_token":null)", R"("unk_token":"<unk>")");
  CHECK(error_loading(t) == p + "model.unk_token: the unk_token \"<unk>\" is not in model.vocab");
  t = TinyTokenizer();
  t.post_processor = R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}})";
  CHECK(error_loading(t) == p + "post_processor.single[0].SpecialToken: the special token \"<s>\" is not in post_processor.special_tokens");
  t.post_processor = R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"B","type_id":0}}],"special_tokens":{}})";
  CHECK(error_loading(t) == p + "post_processor.single[0].Sequence: a single-sequence template may only hold the sequence A, got B");
  t.post_processor = R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[999],"tokens":["<s>"]}}})";
  CHECK(error_loading(t) == p + "post_processor.single: the template has no sequence A");
  t.post_processor = R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[999],"tokens":["<s>"]}}})";
  CHECK(error_loading(t) == p + "post_processor: the template's id 999 is not a token");
}

TEST_CASE("Tokenizer refuses malformed and truncated JSON with the position") {
  CHECK(error_of([] { models::Tokenizer::from_json("{\"model\": {\n  \"type\": \"BPE\",", "t.json"); }) ==
        "[Tokenizer] 't.json': invalid JSON at line 2, column 17: expected a string key, got the end of the text");
  // The committed GPT-2 file cut anywhere is an error, never a crash or a tokenizer.
  std::ifstream in(tokenizer_test::data_dir() / "gpt2_tokenizer.json", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string full = text.str();
  REQUIRE(full.size() > 1000);
  CHECK(error_of([&] { models::Tokenizer::from_json(full); }).empty());
  for (size_t cut = 0; cut < full.size(); cut += full.size() / 97 + 1) {
    CAPTURE(cut);
    CHECK(error_of([&] { models::Tokenizer::from_json(full.substr(0, cut)); }).find("[Tokenizer] 'tokenizer.json': invalid JSON") == 0);
  }
  CHECK(error_of([] { models::Tokenizer::from_file("/nonexistent/tokenizer.json"); })
            .find("[Tokenizer] '/nonexistent/tokenizer.json': cannot open") == 0);
}

TEST_CASE("Tokenizer refuses text that is not UTF-8 and ids that name no token") {
  TinyTokenizer t;
  t.added_tokens = R"([{"id":300,"content":"<m>"}])";  // ids 256..299 are holes
  const models::Tokenizer tok = t.load();
  CHECK(error_of([&] { tok.encode("ab\xC3("); }) ==
        "[Tokenizer] encode: expected valid UTF-8 text, got an invalid sequence at byte 2");
  CHECK(error_of([&] { tok.encode("\xED\xA0\x80"); }) ==
        "[Tokenizer] encode: expected valid UTF-8 text, got an invalid sequence at byte 0");
  for (const int32_t id : {-1, 256, 299, 301}) {
    CAPTURE(id);
    CHECK(error_of([&] { tok.decode(std::vector<int32_t>{97, id}); }) ==
          "[Tokenizer] decode: expected token ids of this vocabulary (below 301), got " + std::to_string(id));
  }
  CHECK(tok.decode(std::vector<int32_t>{97, 300}) == "a<m>");
}
