// non_ascii_char_class: binary search over the generated ranges.
#include <algorithm>

#include "models/char_class.h"

namespace weft::models::detail {

CharClass non_ascii_char_class(char32_t cp) {
  const CharRange* end = kCharRanges + kCharRangeCount;
  // The first range whose last code point is >= cp; cp is in it when its first is <= cp.
  const CharRange* r = std::lower_bound(kCharRanges, end, cp,
                                        [](const CharRange& range, char32_t c) { return range.last < c; });
  return r != end && r->first <= cp ? r->cls : CharClass::kOther;
}

}  // namespace weft::models::detail
