// BPE merging on small hand-written vocabularies, with ids worked out by hand: the lowest rank
// merges first, equal ranks merge leftmost first, new pairs formed by a merge are considered;
// ignore_merges; unk_token with and without fuse_unk; the pre-tokenizer steps around BPE; lookups
// and byte-level decoding.
#include <doctest/doctest.h>

#include <thread>

#include "error_message.h"
#include "tokenizer_test_helpers.h"

using namespace weft;
using tokenizer_test::replaced;
using tokenizer_test::TinyTokenizer;
using Ids = std::vector<int32_t>;

// In every vocabulary here the byte b is the token with id b ('a' = 97, ' ' = 32 spelt "Ġ").

TEST_CASE("BPE merges the lowest-ranked pair first, whatever its position") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"bc":256,"ab":257,"abc":258)";
  t.merges = R"(["b c","a b","a bc"])";
  const models::Tokenizer tok = t.load();
  CHECK(tok.encode("abc") == Ids{258});       // b+c (rank 0), then a+bc (rank 2)
  CHECK(tok.encode("ab") == Ids{257});
  CHECK(tok.encode("abd") == Ids{257, 100});
  CHECK(tok.encode("cab") == Ids{99, 257});
  // The same merges in another order: a+b first leaves "ab c", which has no merge.
  t.merges = R"(["a b","b c","a bc"])";
  CHECK(t.load().encode("abc") == Ids{257, 99});
}

TEST_CASE("BPE merges equal pairs leftmost first and considers the pairs a merge forms") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"aa":256,"aaaa":257)";
  t.merges = R"(["a a","aa aa"])";
  const models::Tokenizer tok = t.load();
  CHECK(tok.encode("aa") == Ids{256});
  CHECK(tok.encode("aaa") == Ids{256, 97});
  CHECK(tok.encode("aaaa") == Ids{257});
  CHECK(tok.encode("aaaaa") == Ids{257, 97});
  CHECK(tok.encode("aaaaaa") == Ids{257, 256});
  // The word cache gives the same ids the second time.
  CHECK(tok.encode("aaaaaa aaaaaa") == Ids{257, 256, 32, 257, 256});
}

TEST_CASE("BPE merges given as [a, b] pairs equal the same merges given as \"a b\" strings") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"bc":256,"ab":257,"abc":258,"Ġa":259)";
  t.merges = R"(["b c","a b","a bc","Ġ a"])";
  const Ids strings = t.load().encode("abc cab ab a");
  t.merges = R"([["b","c"],["a","b"],["a","bc"],["Ġ","a"]])";
  CHECK(t.load().encode("abc cab ab a") == strings);
  // " ab": a+b (rank 1) comes before Ġ+a (rank 3), and "Ġ ab" has no merge.
  CHECK(strings == Ids{258, 32, 99, 257, 32, 257, 259});
}

TEST_CASE("BPE with ignore_merges takes a word that is in the vocabulary whole") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"ca":256,"Ġca":257)";  // no merge makes them
  CHECK(t.load().encode("ca ca") == Ids{99, 97, 32, 99, 97});
  t.model_fields += R"(,"ignore_merges":true)";
  const models::Tokenizer tok = t.load();
  CHECK(tok.encode("ca ca") == Ids{256, 257});
  CHECK(tok.encode("cab") == Ids{99, 97, 98});  // the word "cab" is not in the vocabulary
}

TEST_CASE("BPE maps bytes without a token to unk_token, fused with fuse_unk, and refuses them without one") {
  TinyTokenizer t;
  t.all_bytes = false;  // no 'q' and no 'z'
  t.extra_vocab = R"(,"<unk>":256)";
  CHECK(error_of([&] { t.load().encode("azb"); }) ==
        "[Tokenizer] the byte 0x7a has no token in the vocabulary and model.unk_token is null");
  t.model_fields = replaced(t.model_fields, R"("unk_token":null)", R"("unk_token":"<unk>")");
  CHECK(t.load().encode("azzqb") == Ids{97, 256, 256, 256, 98});
  t.model_fields = replaced(t.model_fields, R"("fuse_unk":false)", R"("fuse_unk":true)");
  CHECK(t.load().encode("azzqb") == Ids{97, 256, 98});
  CHECK(t.load().encode("zaz") == Ids{256, 97, 256});
}

TEST_CASE("Tokenizer splits words with GPT-2's pattern, or Llama 3's before BPE") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"34":256,"12":257,"123":258,"45":259)";
  t.merges = R"(["3 4","1 2","12 3","4 5"])";
  CHECK(t.load().encode("12345") == Ids{257, 256, 53});  // one word: 3+4 first
  t.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":)"
                    R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},)"
                    R"("behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})";
  CHECK(t.load().encode("12345") == Ids{258, 259});  // words "123" and "45"
  // ByteLevel's add_prefix_space in the Sequence prefixes every piece the Split made.
  t.pre_tokenizer = replaced(t.pre_tokenizer, R"("add_prefix_space":false)", R"("add_prefix_space":true)");
  CHECK(t.load().encode("a.b") == Ids{32, 97, 32, 46, 98});  // " a", " .b"
  CHECK(t.load().encode(" a") == Ids{32, 97});               // already starts with a space
}

TEST_CASE("Tokenizer looks tokens up both ways and decodes the byte-level spelling to bytes") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"Ġhé":256)";
  const models::Tokenizer tok = t.load();
  CHECK(tok.vocab_size() == 257);
  CHECK(tok.token_to_id("Ġ") == 32);
  CHECK(tok.token_to_id("a") == 97);
  CHECK(tok.token_to_id(" ") == std::nullopt);  // a space is spelt "Ġ"
  CHECK(tok.id_to_token(10) == "\u010a");        // '\n'
  CHECK(tok.id_to_token(256) == "Ġhé");
  CHECK(tok.id_to_token(257) == std::nullopt);
  CHECK(tok.id_to_token(-1) == std::nullopt);
  // "é" in the vocabulary is the byte 0xE9 (it stands for itself in the byte-level alphabet).
  CHECK(tok.decode(Ids{256}) == " h\xEF\xBF\xBD");
  CHECK(tok.decode(Ids{104, 0xC3, 0xA9}) == "h\xC3\xA9");
  CHECK(tok.decode(Ids{}).empty());
  CHECK(tok.encode("").empty());
  CHECK(tok.encode("", true).empty());
}

TEST_CASE("BPE gives the same ids for long words (not cached) and from many threads at once") {
  TinyTokenizer t;
  t.extra_vocab = R"(,"aa":256,"aaaa":257)";
  t.merges = R"(["a a","aa aa"])";
  const models::Tokenizer tok = t.load();
  const std::string long_word(1001, 'a');  // 250 "aaaa", then "a"
  Ids expected(250, 257);
  expected.push_back(97);
  CHECK(tok.encode(long_word) == expected);
  CHECK(tok.encode(long_word) == expected);
  // Threads fill one fresh word cache together; each must still get exactly the sequential ids.
  const std::string text = tokenizer_test::generated_text(5, 1 << 16);
  const Ids sequential = tok.encode(text);
  const models::Tokenizer shared = t.load();
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = shared.encode(text); });
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK(r == sequential);
}
