// The loaded state of a Tokenizer, shared by its copies: built once by the tokenizer.json loader
// (tokenizer_json.cpp), read-only afterwards except for the BPE word cache (which locks).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/json.h"
#include "models/added_tokens.h"
#include "models/bpe.h"
#include "models/pretokenizer.h"
#include "models/tokenizer.h"

namespace weft::models {

struct Tokenizer::Impl {
  std::unique_ptr<Bpe> bpe;
  PreTokenizer pre_tokenizer;
  AddedTokenMatcher added_tokens;
  // The single-sequence template of the post-processor: ids before and after the text's.
  std::vector<int32_t> template_prefix, template_suffix;

  // Per id (holes allowed): whether it names a token, whether that is a special added token, and
  // the vocabulary spelling (the bytes decode emits for it are the BPE model's token_bytes).
  std::vector<bool> present, special;
  StringTable spellings;
  StringIndex ids_by_spelling;  // over spellings

  std::optional<int32_t> bos, eos;
};

// Builds the state from a parsed tokenizer.json; errors start with `prefix`.
std::unique_ptr<Tokenizer::Impl> load_tokenizer_json(const io::JsonValue& root, const std::string& prefix);

// Sets bos/eos from a parsed tokenizer_config.json's "bos_token"/"eos_token" where it names them.
void apply_tokenizer_config(Tokenizer::Impl& impl, const io::JsonValue& config, const std::string& prefix);

}  // namespace weft::models
