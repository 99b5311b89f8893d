// StringTable and StringIndex (string_table.h): linear probing from the string's hash, so a
// lookup reads one slot per probe and compares strings only where a slot is taken.
#include "models/string_table.h"

#include <bit>
#include <functional>
#include <limits>

#include "tensor/error.h"

namespace weft::models {

void StringTable::set(size_t id, std::string_view text) {
  WEFT_CHECK(buffer_.size() + text.size() <= std::numeric_limits<uint32_t>::max(),
             "[StringTable] expected strings of at most 4 GiB in all, got ", buffer_.size() + text.size(), " bytes");
  spans_.at(id) = {static_cast<uint32_t>(buffer_.size()), static_cast<uint32_t>(text.size())};
  buffer_.append(text);
}

StringIndex::StringIndex(const StringTable& table, std::span<const int32_t> ids)
    : slots_(std::bit_ceil(2 * ids.size() + 2), -1) {
  for (const int32_t id : ids) slots_[slot_of(table, table[static_cast<size_t>(id)])] = id;
}

size_t StringIndex::slot_of(const StringTable& table, std::string_view text) const {
  const size_t mask = slots_.size() - 1;
  size_t slot = std::hash<std::string_view>{}(text) & mask;
  while (slots_[slot] >= 0 && table[static_cast<size_t>(slots_[slot])] != text) slot = (slot + 1) & mask;
  return slot;
}

std::optional<int32_t> StringIndex::find(const StringTable& table, std::string_view text) const {
  if (slots_.empty()) return std::nullopt;
  const int32_t id = slots_[slot_of(table, text)];
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace weft::models
