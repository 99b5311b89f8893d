// Tokenizer: loading entry points, and the encode and decode pipelines (see tokenizer.h).
//
// encode: added tokens are cut out of the text first; every other stretch is pre-tokenized into
// words and each word is encoded by BPE; the template's ids go around the result.
// decode: each id's bytes (the ByteLevel decoder's mapping, computed at load) are concatenated,
// then invalid UTF-8 becomes U+FFFD.
#include "models/tokenizer.h"

#include <deque>

#include "io/json.h"
#include "models/tokenizer_impl.h"
#include "io/utf8.h"
#include "tensor/error.h"

namespace weft::models {

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  const io::JsonValue document = io::read_json_file(path, "Tokenizer");
  return Tokenizer(load_tokenizer_json(document, "[Tokenizer] '" + path.string() + "': "));
}

Tokenizer Tokenizer::from_folder(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer.json";
  std::unique_ptr<Impl> impl =
      load_tokenizer_json(io::read_json_file(path, "Tokenizer"), "[Tokenizer] '" + path.string() + "': ");
  const std::filesystem::path config = dir / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config, ec))
    apply_tokenizer_config(*impl, io::read_json_file(config, "Tokenizer"), "[Tokenizer] '" + config.string() + "': ");
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& origin) {
  const std::string prefix = "[Tokenizer] '" + origin + "': ";
  return Tokenizer(load_tokenizer_json(io::parse_json(json, "Tokenizer", origin), prefix));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t invalid = io::find_invalid_utf8(text);
  WEFT_CHECK(invalid == std::string_view::npos, "[Tokenizer] encode: expected valid UTF-8 text, got an invalid "
             "sequence at byte ", invalid);
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = impl_->template_prefix;
  std::vector<AddedTokenMatcher::Segment> segments;
  impl_->added_tokens.split(text, segments);
  std::vector<std::string_view> words;
  std::deque<std::string> storage;
  for (const AddedTokenMatcher::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    words.clear();
    impl_->pre_tokenizer.split(segment.text, words, storage);
    for (const std::string_view word : words) impl_->bpe->encode_word(word, ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->template_suffix.begin(), impl_->template_suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) {
    WEFT_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->present.size() && impl_->present[static_cast<size_t>(id)],
               "[Tokenizer] decode: expected token ids of this vocabulary (below ", vocab_size(), "), got ", id);
    if (skip_special_tokens && impl_->special[static_cast<size_t>(id)]) continue;
    bytes += impl_->bpe->token_bytes()[static_cast<size_t>(id)];
  }
  return io::to_valid_utf8(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->ids_by_spelling.find(impl_->spellings, token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->present.size() || !impl_->present[static_cast<size_t>(id)])
    return std::nullopt;
  return std::string(impl_->spellings[static_cast<size_t>(id)]);
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->present.size()); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }

}  // namespace weft::models
