// The tokenizer.json loader: walks the parsed document, refuses by name every component it does
// not implement, checks every key it uses (errors name the key path, e.g. model.merges[3]), and
// builds the tables of Tokenizer::Impl.
#include <algorithm>
#include <limits>
#include <optional>

#include "models/byte_level.h"
#include "models/tokenizer_impl.h"
#include "tensor/error.h"

namespace weft::models {
namespace {

using io::JsonValue;

constexpr const char* kSupportedModel = "BPE with a ByteLevel pre-tokenizer";
constexpr const char* kSupportedPreTokenizer =
    "ByteLevel, or a Sequence of Split (GPT-2's or Llama 3's pattern) and ByteLevel";

// A JSON value with the key path that leads to it, so every error can name the key.
class Field {
 public:
  Field(const JsonValue& value, std::string path, const std::string& prefix)
      : value_(&value), path_(std::move(path)), prefix_(&prefix) {}

  const JsonValue& value() const { return *value_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what) const {
    if (path_.empty()) WEFT_FAIL(*prefix_, what);
    WEFT_FAIL(*prefix_, path_, ": ", what);
  }

  // The member `key`, which must be there (null counts as there).
  Field member(std::string_view key) const {
    const JsonValue* v = object().find(key);
    if (v == nullptr) WEFT_FAIL(*prefix_, "the key '", child_path(key), "' is missing");
    return Field(*v, child_path(key), *prefix_);
  }
  // The member `key` unless it is absent or null.
  std::optional<Field> optional_member(std::string_view key) const {
    const JsonValue* v = object().find(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    return Field(*v, child_path(key), *prefix_);
  }

  const JsonValue& object() const {
    if (!value_->is_object()) fail(std::string("expected an object, got ") + value_->kind_name());
    return *value_;
  }
  const JsonValue::Array& array() const {
    if (!value_->is_array()) fail(std::string("expected an array, got ") + value_->kind_name());
    return value_->as_array();
  }
  const std::string& string() const {
    if (!value_->is_string()) fail(std::string("expected a string, got ") + value_->kind_name());
    return value_->as_string();
  }
  bool boolean() const {
    if (!value_->is_bool()) fail(std::string("expected true or false, got ") + value_->kind_name());
    return value_->as_bool();
  }
  // An integer id in [0, 2^31 - 1).
  int32_t id() const {
    if (!value_->is_integer()) fail(std::string("expected an integer id, got ") + value_->kind_name());
    const int64_t v = value_->as_integer();
    if (v < 0 || v >= std::numeric_limits<int32_t>::max()) fail(weft::detail::cat("the id ", v, " is out of range"));
    return static_cast<int32_t>(v);
  }
  Field element(size_t i) const { return Field(array()[i], weft::detail::cat(path_, "[", i, "]"), *prefix_); }
  // The member `key` of an object, known to be there (found by iterating or by find).
  Field child(const JsonValue& value, std::string_view key) const {
    return Field(value, path_ + "[\"" + std::string(key) + "\"]", *prefix_);
  }

  // The "type" member of a component.
  std::string type() const { return member("type").string(); }

 private:
  std::string child_path(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const JsonValue* value_;
  std::string path_;
  const std::string* prefix_;
};

bool optional_bool(const Field& f, std::string_view key, bool otherwise) {
  const auto member = f.optional_member(key);
  return member ? member->boolean() : otherwise;
}

using Vocab = std::unordered_map<std::string_view, int32_t>;  // views of the document's strings

// model.vocab as (spelling, id) pairs viewing the document, in document order.
std::vector<std::pair<std::string_view, int32_t>> read_vocab(const Field& vocab) {
  std::vector<std::pair<std::string_view, int32_t>> entries;
  entries.reserve(vocab.object().as_object().size());
  for (const auto& [spelling, value] : vocab.object().as_object()) {
    // The common case without building a Field (whose key path costs an allocation).
    const bool valid = value.is_integer() && value.as_integer() >= 0 && value.as_integer() < std::numeric_limits<int32_t>::max();
    entries.emplace_back(spelling, valid ? static_cast<int32_t>(value.as_integer()) : vocab.child(value, spelling).id());
  }
  return entries;
}

// model.merges: "a b" strings or [a, b] pairs, in rank order, as ids.
std::vector<Bpe::Merge> read_merges(const Field& model, const Vocab& vocab) {
  const Field merges = model.member("merges");
  std::vector<Bpe::Merge> out;
  out.reserve(merges.array().size());
  std::string joined;
  const JsonValue::Array& list = merges.array();
  for (size_t i = 0; i < list.size(); ++i) {
    // Fields (with their key paths) are built only to report an error: this loop runs 100k+ times.
    const JsonValue& merge = list[i];
    std::string_view left, right;
    if (merge.is_string()) {
      const std::string_view line = merge.as_string();
      const size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
        merges.element(i).fail("expected two tokens separated by one space, got \"" + std::string(line) + "\"");
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.as_array().size() == 2) {
      const auto& pair = merge.as_array();
      if (!pair[0].is_string() || !pair[1].is_string()) merges.element(i).element(pair[0].is_string() ? 1 : 0).string();
      left = pair[0].as_string();
      right = pair[1].as_string();
    } else {
      merges.element(i).fail(std::string("expected a string \"a b\" or a pair [\"a\", \"b\"], got ") + merge.kind_name());
    }
    auto id_of = [&](std::string_view token) {
      const auto it = vocab.find(token);
      if (it == vocab.end())
        merges.element(i).fail("the merge names \"" + std::string(token) + "\", which is not in model.vocab");
      return it->second;
    };
    joined.assign(left).append(right);
    out.push_back({id_of(left), id_of(right), id_of(joined)});
  }
  return out;
}

std::vector<AddedToken> read_added_tokens(const Field& root) {
  std::vector<AddedToken> out;
  const auto list = root.optional_member("added_tokens");
  if (!list) return out;
  for (size_t i = 0; i < list->array().size(); ++i) {
    const Field entry = list->element(i);
    AddedToken token;
    token.id = entry.member("id").id();
    token.content = entry.member("content").string();
    if (token.content.empty()) entry.member("content").fail("an added token may not be empty");
    token.special = optional_bool(entry, "special", false);
    token.lstrip = optional_bool(entry, "lstrip", false);
    token.rstrip = optional_bool(entry, "rstrip", false);
    token.normalized = optional_bool(entry, "normalized", !token.special);
    if (optional_bool(entry, "single_word", false))
      entry.member("single_word").fail("single_word=true is not supported (added token \"" + token.content + "\")");
    for (const AddedToken& earlier : out)
      if (earlier.content == token.content) entry.fail("the added token \"" + token.content + "\" is listed twice");
    out.push_back(std::move(token));
  }
  return out;
}

void check_normalizer(const Field& root) {
  const auto normalizer = root.optional_member("normalizer");
  if (!normalizer) return;
  const std::string type = normalizer->type();
  if (type == "Sequence" && normalizer->member("normalizers").array().empty()) return;
  root.fail("normalizer type '" + type + "' is not supported (supported: none)");
}

PreTokenizerStep read_byte_level(const Field& f) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kByteLevel;
  step.add_prefix_space = optional_bool(f, "add_prefix_space", true);
  step.use_regex = optional_bool(f, "use_regex", true);
  return step;
}

PreTokenizerStep read_split(const Field& f) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kSplit;
  const Field pattern = f.member("pattern");
  const auto regex = pattern.optional_member("Regex");
  if (!regex) pattern.fail("only a Regex pattern is supported (GPT-2's or Llama 3's)");
  if (!split_pattern_from_regex(regex->string(), step.pattern))
    regex->fail("the Split pattern '" + regex->string() + "' is not supported (supported: GPT-2's and Llama 3's)");
  const std::string behavior = f.member("behavior").string();
  if (behavior != "Isolated") f.member("behavior").fail("Split behavior '" + behavior + "' is not supported (supported: Isolated)");
  if (optional_bool(f, "invert", false)) f.member("invert").fail("an inverted Split is not supported");
  return step;
}

PreTokenizer read_pre_tokenizer(const Field& root) {
  const auto f = root.optional_member("pre_tokenizer");
  if (!f) root.fail(std::string("pre_tokenizer null is not supported (supported: ") + kSupportedPreTokenizer + ")");
  std::vector<PreTokenizerStep> steps;
  const std::string type = f->type();
  if (type == "ByteLevel") {
    steps.push_back(read_byte_level(*f));
  } else if (type == "Sequence") {
    const Field list = f->member("pretokenizers");
    for (size_t i = 0; i < list.array().size(); ++i) {
      const Field step = list.element(i);
      const std::string step_type = step.type();
      if (step_type == "ByteLevel") {
        steps.push_back(read_byte_level(step));
      } else if (step_type == "Split") {
        steps.push_back(read_split(step));
      } else {
        step.fail("type '" + step_type + "' is not supported (supported: " + kSupportedPreTokenizer + ")");
      }
    }
    if (steps.empty() || steps.back().kind != PreTokenizerStep::Kind::kByteLevel)
      list.fail("a Sequence of pre-tokenizers must end with ByteLevel (the byte-level mapping)");
  } else {
    root.fail("pre_tokenizer type '" + type + "' is not supported (supported: " + kSupportedPreTokenizer + ")");
  }
  return PreTokenizer(std::move(steps));
}

// TemplateProcessing's single template: the ids before and after the sequence $A.
void read_template(const Field& f, Tokenizer::Impl& impl) {
  const Field single = f.member("single");
  const Field specials = f.member("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.array().size(); ++i) {
    const Field item = single.element(i);
    if (const auto sequence = item.optional_member("Sequence")) {
      const std::string name = sequence->member("id").string();
      if (name != "A") sequence->fail("a single-sequence template may only hold the sequence A, got " + name);
      if (seen_sequence) sequence->fail("the sequence A appears twice");
      seen_sequence = true;
    } else if (const auto special = item.optional_member("SpecialToken")) {
      const std::string name = special->member("id").string();
      const auto entry = specials.object().find(name);
      if (entry == nullptr) special->fail("the special token \"" + name + "\" is not in " + specials.path());
      const Field ids = specials.child(*entry, name).member("ids");
      for (size_t k = 0; k < ids.array().size(); ++k)
        (seen_sequence ? impl.template_suffix : impl.template_prefix).push_back(ids.element(k).id());
    } else {
      item.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) single.fail("the template has no sequence A");
}

void read_post_processor(const Field& root, Tokenizer::Impl& impl) {
  const auto f = root.optional_member("post_processor");
  if (!f) return;
  auto read_one = [&](const Field& p) {
    const std::string type = p.type();
    if (type == "ByteLevel") return;  // it only adjusts offsets, which encode does not return
    if (type == "TemplateProcessing") {
      if (!impl.template_prefix.empty() || !impl.template_suffix.empty()) p.fail("a second template is not supported");
      read_template(p, impl);
      return;
    }
    p.fail("type '" + type + "' is not supported (supported: ByteLevel, TemplateProcessing)");
  };
  if (f->type() == "Sequence") {
    const Field list = f->member("processors");
    for (size_t i = 0; i < list.array().size(); ++i) read_one(list.element(i));
  } else {
    read_one(*f);
  }
}

void check_decoder(const Field& root) {
  const auto f = root.optional_member("decoder");
  if (!f) root.fail("decoder null is not supported (supported: ByteLevel)");
  const std::string type = f->type();
  if (type != "ByteLevel") root.fail("decoder type '" + type + "' is not supported (supported: ByteLevel)");
}

Bpe::Options read_model_options(const Field& model, const Vocab& vocab) {
  Bpe::Options options;
  options.ignore_merges = optional_bool(model, "ignore_merges", false);
  options.fuse_unk = optional_bool(model, "fuse_unk", false);
  if (const auto dropout = model.optional_member("dropout")) {
    if (!dropout->value().is_number()) dropout->fail(std::string("expected a number, got ") + dropout->value().kind_name());
    if (dropout->value().as_number() != 0)
      dropout->fail(weft::detail::cat("dropout ", dropout->value().as_number(), " is not supported (encoding would be random)"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const auto affix = model.optional_member(key); affix && !affix->string().empty())
      affix->fail("'" + affix->string() + "' is not supported (byte-level BPE has none)");
  if (const auto unk = model.optional_member("unk_token")) {
    const auto it = vocab.find(unk->string());
    if (it == vocab.end()) unk->fail("the unk_token \"" + unk->string() + "\" is not in model.vocab");
    options.unk_id = it->second;
  }
  return options;
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_tokenizer_json(const JsonValue& document, const std::string& prefix) {
  const Field root(document, "", prefix);
  root.object();
  if (const auto version = root.optional_member("version"); version && version->string() != "1.0")
    version->fail("unknown tokenizer.json version '" + version->string() + "' (supported: 1.0)");
  for (const char* key : {"truncation", "padding"})
    if (root.optional_member(key)) root.fail(std::string(key) + " is not supported (it must be null)");

  const Field model = root.member("model");
  const std::string type = model.type();
  if (type != "BPE") root.fail("model type '" + type + "' is not supported (supported: " + kSupportedModel + ")");
  if (optional_bool(model, "byte_fallback", false))
    root.fail(std::string("model BPE with byte_fallback=true (SentencePiece-style, as Llama 2's) is not supported "
                          "(supported: ") + kSupportedModel + ")");
  check_normalizer(root);
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->pre_tokenizer = read_pre_tokenizer(root);
  check_decoder(root);

  const Field vocab_field = model.member("vocab");
  const auto vocab_entries = read_vocab(vocab_field);
  const std::vector<AddedToken> added = read_added_tokens(root);

  // The id tables. Ids may have holes, but not so many that a hostile file could make these
  // tables huge: the highest id must stay below twice the number of tokens (plus some slack).
  const size_t count = vocab_entries.size() + added.size();
  int64_t max_id = -1;
  for (const auto& [spelling, id] : vocab_entries) max_id = std::max<int64_t>(max_id, id);
  for (const AddedToken& token : added) max_id = std::max<int64_t>(max_id, token.id);
  if (max_id >= static_cast<int64_t>(2 * count + 256))
    vocab_field.fail(weft::detail::cat("ids run to ", max_id, " for only ", count,
                                       " tokens; a vocabulary this sparse is not supported"));
  const auto size = static_cast<size_t>(max_id + 1);
  std::vector<const std::string_view*> vocab_by_id(size, nullptr);
  Vocab vocab;
  vocab.reserve(vocab_entries.size());
  for (const auto& entry : vocab_entries) {
    const std::string_view*& slot = vocab_by_id[static_cast<size_t>(entry.second)];
    if (slot != nullptr)
      vocab_field.fail(weft::detail::cat("the id ", entry.second, " is given to both \"", *slot, "\" and \"",
                                         entry.first, "\""));
    slot = &entry.first;
    vocab.emplace(entry.first, entry.second);
  }
  const std::vector<Bpe::Merge> merges = read_merges(model, vocab);
  const Bpe::Options options = read_model_options(model, vocab);

  // Added tokens keep the id the vocabulary gives their spelling; a new one may not take an id
  // the vocabulary gives another token.
  for (size_t i = 0; i < added.size(); ++i) {
    const Field entry = root.member("added_tokens").element(i);
    if (const auto it = vocab.find(added[i].content); it != vocab.end() && it->second != added[i].id)
      entry.fail(weft::detail::cat("the added token \"", added[i].content, "\" has id ", added[i].id,
                                   " but model.vocab gives it ", it->second));
    if (const std::string_view* other = vocab_by_id[static_cast<size_t>(added[i].id)]; other && *other != added[i].content)
      entry.fail(weft::detail::cat("the added token \"", added[i].content, "\" has id ", added[i].id,
                                   ", which model.vocab gives \"", *other, "\""));
    for (size_t k = 0; k < i; ++k)
      if (added[k].id == added[i].id) entry.fail(weft::detail::cat("the id ", added[i].id, " is given to two added tokens"));
  }

  impl->present.assign(size, false);
  impl->special.assign(size, false);
  impl->spellings = StringTable(size);
  StringTable bytes(size);
  std::vector<int32_t> spelled_ids, byte_vocab_ids;  // the ids to index by spelling, and BPE's words
  spelled_ids.reserve(count);
  byte_vocab_ids.reserve(vocab_entries.size());
  // The ByteLevel decoder: a token of byte-level characters stands for those bytes (`raw`); any
  // other token (an added one such as "<|endoftext|>" is both) for its own UTF-8.
  auto add_spelling = [&](std::string_view spelling, int32_t id, const std::optional<std::string>& raw) {
    const auto i = static_cast<size_t>(id);
    impl->present[i] = true;
    impl->spellings.set(i, spelling);
    bytes.set(i, raw ? std::string_view(*raw) : spelling);
    spelled_ids.push_back(id);
  };
  for (const auto& [spelling, id] : vocab_entries) {
    const std::optional<std::string> raw = detail::token_to_bytes(spelling);
    add_spelling(spelling, id, raw);
    if (raw) byte_vocab_ids.push_back(id);
  }
  for (const AddedToken& token : added) {
    add_spelling(token.content, token.id, detail::token_to_bytes(token.content));
    impl->special[static_cast<size_t>(token.id)] = token.special;
  }
  impl->ids_by_spelling = StringIndex(impl->spellings, spelled_ids);
  impl->bpe = std::make_unique<Bpe>(std::move(bytes), byte_vocab_ids, merges, options);
  impl->added_tokens = AddedTokenMatcher(added);

  read_post_processor(root, *impl);
  for (const int32_t id : impl->template_prefix) {
    if (static_cast<size_t>(id) >= size || !impl->present[static_cast<size_t>(id)])
      root.member("post_processor").fail(weft::detail::cat("the template's id ", id, " is not a token"));
  }
  for (const int32_t id : impl->template_suffix) {
    if (static_cast<size_t>(id) >= size || !impl->present[static_cast<size_t>(id)])
      root.member("post_processor").fail(weft::detail::cat("the template's id ", id, " is not a token"));
  }
  if (!impl->template_prefix.empty()) impl->bos = impl->template_prefix.front();
  if (!impl->template_suffix.empty()) impl->eos = impl->template_suffix.back();
  return impl;
}

void apply_tokenizer_config(Tokenizer::Impl& impl, const JsonValue& config, const std::string& prefix) {
  const Field root(config, "", prefix);
  root.object();
  auto read = [&](const char* key, std::optional<int32_t>& target) {
    const auto f = root.optional_member(key);
    if (!f) return;
    // A string, or an AddedToken object {"content": ...}.
    const std::string name = f->value().is_object() ? f->member("content").string() : f->string();
    const std::optional<int32_t> id = impl.ids_by_spelling.find(impl.spellings, name);
    if (!id) f->fail("the token \"" + name + "\" is not in the tokenizer's vocabulary");
    target = *id;
  };
  read("bos_token", impl.bos);
  read("eos_token", impl.eos);
}

}  // namespace weft::models
