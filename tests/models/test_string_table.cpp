// StringTable and StringIndex, the tokenizer's vocabulary storage: strings by id with holes, and
// string → id lookups over a chosen set of ids, checked against a std::map built beside them.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "models/all.h"
#include "models/string_table.h"

using namespace weft;
using models::StringIndex;
using models::StringTable;

TEST_CASE("StringTable: ids start empty, hold what was set last, and refuse ids past the size") {
  StringTable table(4);
  table.set(2, "merge");
  table.set(0, "");
  table.set(3, std::string("a\0b", 3));
  table.set(2, "merged");
  CHECK(table.size() == 4);
  CHECK(table[0].empty());
  CHECK(table[1].empty());
  CHECK(table[2] == "merged");
  CHECK(table[3] == std::string_view("a\0b", 3));
  CHECK_THROWS(table.set(4, "x"));
}

TEST_CASE("StringIndex: finds every indexed id among thousands, nothing else, and the later id of a repeated string") {
  const size_t n = 5000;
  StringTable table(n + 2);
  std::map<std::string, int32_t> expected;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; i += 1) {
    if (i % 7 == 3) continue;  // holes: ids never set
    // Short strings sharing prefixes, as BPE vocabularies do.
    // (Built with +=: g++ 12 warns falsely on "t" + std::string, -Wrestrict, its bug 105329.)
    std::string s = "t";
    s += std::to_string(i % 97) + "_" + std::to_string(i);
    table.set(i, s);
    if (i % 5 != 0) {  // set but not indexed: a lookup must not find these
      ids.push_back(static_cast<int32_t>(i));
      expected[s] = static_cast<int32_t>(i);
    }
  }
  table.set(n, "t1_1");  // the same string as id 1: indexed later, so it wins
  table.set(n + 1, "");
  ids.push_back(static_cast<int32_t>(n));
  ids.push_back(static_cast<int32_t>(n + 1));
  expected["t1_1"] = static_cast<int32_t>(n);
  expected[""] = static_cast<int32_t>(n + 1);

  const StringIndex index(table, ids);
  for (const auto& entry : expected) {
    CAPTURE(entry.first);
    CHECK(index.find(table, entry.first) == entry.second);
  }
  CHECK_FALSE(index.find(table, "t0_0").has_value());  // set, not indexed
  CHECK_FALSE(index.find(table, "t3_3").has_value());  // a hole
  CHECK_FALSE(index.find(table, "missing").has_value());
  CHECK_FALSE(StringIndex().find(table, "t1_1").has_value());
}
