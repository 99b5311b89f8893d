// Tokenizer: text to token ids and back, loaded from a Hugging Face `tokenizer.json` (the
// `tokenizers` library's format), giving the ids that library gives.
//
// Supported, and refused by name otherwise when loading:
//   model          BPE (vocab; merges as "a b" strings or [a, b] pairs; ignore_merges; unk_token
//                  with fuse_unk; dropout null or 0; no subword prefix/suffix; byte_fallback false,
//                  so SentencePiece-style BPE files such as Llama 2's are refused)
//   normalizer     null
//   pre_tokenizer  ByteLevel (add_prefix_space, use_regex: GPT-2's pattern), or a Sequence of
//                  Split steps (GPT-2's or Llama 3's pattern, behavior Isolated, not inverted) and
//                  ByteLevel steps, ending in a ByteLevel
//   post_processor null, ByteLevel, TemplateProcessing (the single-sequence template), or a
//                  Sequence of those
//   decoder        ByteLevel
//   added_tokens   special or not, lstrip, rstrip, normalized; single_word=true is refused
//   truncation, padding  null
// That covers GPT-2's and Llama 3's files and what `tokenizers` saves for byte-level BPE.
//
// Differences from the reference library, all on bad input: encode refuses text that is not
// valid UTF-8 (a Python str always is), and decode refuses ids that name no token (the library
// skips them silently). A byte without a token and without an unk_token is an error (the library
// drops it).
//
// Thread safety: encode and decode may run concurrently on one Tokenizer (or its copies, which
// share the loaded tables and the word cache).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::models {

class Tokenizer {
 public:
  // Loads a tokenizer.json.
  static Tokenizer from_file(const std::filesystem::path& path);
  // Loads dir/tokenizer.json, and the bos/eos tokens from dir/tokenizer_config.json when there is
  // one (its "bos_token" and "eos_token", strings or {"content": ...} objects).
  static Tokenizer from_folder(const std::filesystem::path& dir);
  // Loads tokenizer.json text; errors name `origin`.
  static Tokenizer from_json(std::string_view json, const std::string& origin = "tokenizer.json");

  // The ids of `text` (valid UTF-8). add_special_tokens applies the post-processor's template
  // (Llama 3: <|begin_of_text|> first); special tokens written in the text are matched either way.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`: their bytes, with each invalid UTF-8 stretch shown as U+FFFD.
  // skip_special_tokens leaves out the added tokens marked special.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's spelling in the vocabulary (byte-level characters: a space is "Ġ").
  std::optional<std::string> id_to_token(int32_t id) const;
  // One past the highest id: the rows an embedding table needs.
  int64_t vocab_size() const;
  bool is_special(int32_t id) const;

  // From tokenizer_config.json when from_folder found one that names them; otherwise the
  // template's special token before the sequence (bos) and after it (eos), when it has them.
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace weft::models
