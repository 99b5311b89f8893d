// Byte-level BPE merging (see bpe.h).
#include "models/bpe.h"

#include <cstdio>
#include <queue>

#include "tensor/error.h"

namespace weft::models {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;  // neighbours' indices, -1 at the ends
  bool alive;          // false once merged into its left neighbour
};

struct Candidate {
  uint32_t rank;
  int32_t pos;     // the left symbol of the pair
  int32_t merged;  // what the pair becomes; a stale candidate's pair no longer merges into it
  // The heap's top is the lowest rank, then the leftmost position.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Bpe::Bpe(StringTable token_bytes, std::span<const int32_t> vocab_ids, const std::vector<Merge>& merges,
         Options options)
    : bytes_(std::move(token_bytes)), vocab_(bytes_, vocab_ids), options_(options) {
  merges_.reserve(merges.size());
  // A pair listed twice keeps its last rank, as the reference library's map does.
  for (size_t rank = 0; rank < merges.size(); ++rank)
    merges_[pair_key(merges[rank].left, merges[rank].right)] = {static_cast<uint32_t>(rank), merges[rank].merged};
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    byte_ids_[b] = vocab_.find(bytes_, std::string_view(&byte, 1)).value_or(-1);
  }
}

const Bpe::RankedMerge* Bpe::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (const std::optional<int32_t> id = vocab_.find(bytes_, word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, out);
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  const std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < options_.cache_capacity)
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (const char c : word) {
    const auto b = static_cast<uint8_t>(c);
    int32_t id = byte_ids_[b];
    if (id < 0) {
      if (!options_.unk_id) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", b);
        WEFT_FAIL("[Tokenizer] the byte ", hex, " has no token in the vocabulary and model.unk_token is null");
      }
      id = *options_.unk_id;
      if (options_.fuse_unk && !symbols.empty() && symbols.back().id == id) continue;
    }
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  }
  symbols.back().next = -1;

  std::priority_queue<Candidate> heap;
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const RankedMerge* m = find_merge(symbols[i].id, symbols[i + 1].id))
      heap.push({m->rank, static_cast<int32_t>(i), m->merged});

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const RankedMerge* current = find_merge(left.id, right.id);
    if (current == nullptr || current->merged != top.merged) continue;  // stale
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const RankedMerge* m = find_merge(symbols[static_cast<size_t>(left.prev)].id, left.id))
        heap.push({m->rank, left.prev, m->merged});
    if (left.next >= 0)
      if (const RankedMerge* m = find_merge(left.id, symbols[static_cast<size_t>(left.next)].id))
        heap.push({m->rank, top.pos, m->merged});
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace weft::models
