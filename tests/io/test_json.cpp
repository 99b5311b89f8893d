// parse_json / read_json_file: every kind of value, escapes and numbers read exactly, member
// order kept, and each malformed input refused with its line and column.
#include <doctest/doctest.h>

#include <fstream>

#include "../error_message.h"
#include "../temp_dir.h"
#include "io/all.h"

using namespace weft;
using io::JsonValue;

TEST_CASE("parse_json reads every kind of value") {
  const JsonValue v = io::parse_json(
      " {\"s\": \"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"n\": [0, -12, 3.5, -1e3, 2E+2, 9223372036854775807,"
      " 9223372036854775808], \"t\": true, \"f\": false, \"z\": null, \"o\": {}, \"a\": [], \"u\": \"\xE6\x97\xA5\"}\n",
      "test");
  REQUIRE(v.is_object());
  CHECK(v.find("s")->as_string() == "a\"b\\c/\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80");
  const auto& n = v.find("n")->as_array();
  REQUIRE(n.size() == 7);
  CHECK(n[0].as_integer() == 0);
  CHECK(n[1].as_integer() == -12);
  CHECK(n[2].as_number() == 3.5);
  CHECK_FALSE(n[2].is_integer());
  CHECK(n[3].as_number() == -1000.0);
  CHECK_FALSE(n[3].is_integer());  // an exponent makes it a float, as in JSON parsers generally
  CHECK(n[4].as_number() == 200.0);
  CHECK(n[5].as_integer() == INT64_MAX);
  CHECK_FALSE(n[6].is_integer());  // past int64: only its double
  CHECK(n[6].as_number() == 9223372036854775808.0);
  CHECK(v.find("t")->as_bool());
  CHECK_FALSE(v.find("f")->as_bool());
  CHECK(v.find("z")->is_null());
  CHECK(v.find("o")->as_object().empty());
  CHECK(v.find("a")->as_array().empty());
  CHECK(v.find("u")->as_string() == "\xE6\x97\xA5");
  CHECK(v.find("missing") == nullptr);
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.as_object()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"s", "n", "t", "f", "z", "o", "a", "u"});  // document order
  CHECK(io::parse_json("\"x\"", "test").as_string() == "x");
  CHECK(io::parse_json(" 7 ", "test").as_integer() == 7);
}

TEST_CASE("JsonValue accessors name the kind they found") {
  const JsonValue v = io::parse_json("[1.5, \"s\"]", "test");
  CHECK(error_of([&] { v.as_object(); }) == "[JsonValue] expected an object, got an array");
  CHECK(error_of([&] { v.as_array()[0].as_integer(); }) == "[JsonValue] expected an integer, got the number 1.5");
  CHECK(error_of([&] { v.as_array()[1].as_bool(); }) == "[JsonValue] expected a boolean, got a string");
  CHECK(v.find("x") == nullptr);  // find on a non-object is no error
}

TEST_CASE("parse_json refuses malformed text with the line and column") {
  const auto err = [](std::string_view text) { return error_of([&] { io::parse_json(text, "op"); }); };
  CHECK(err("") == "[op] invalid JSON at line 1, column 1: expected a value, got the end of the text");
  CHECK(err("{\"a\": [1, 2") == "[op] invalid JSON at line 1, column 12: expected ',' or ']' after an array element, got the end of the text");
  CHECK(err("{\"a\": 1,}") == "[op] invalid JSON at line 1, column 9: expected a string key, got '}'");
  CHECK(err("[1,]") == "[op] invalid JSON at line 1, column 4: expected a value, got ']'");
  CHECK(err("{\"a\" 1}") == "[op] invalid JSON at line 1, column 6: expected ':' after the key \"a\", got '1'");
  CHECK(err("[01]") == "[op] invalid JSON at line 1, column 3: a number may not start with 0 followed by digits");
  CHECK(err("[1.]") == "[op] invalid JSON at line 1, column 4: expected a digit after '.', got ']'");
  CHECK(err("[-]") == "[op] invalid JSON at line 1, column 3: expected a digit in a number, got ']'");
  CHECK(err("[1e]") == "[op] invalid JSON at line 1, column 4: expected a digit in an exponent, got ']'");
  CHECK(err("[1e999]") == "[op] invalid JSON at line 1, column 7: a number past the range of a double");
  CHECK(err("[tru]") == "[op] invalid JSON at line 1, column 2: expected a value, got 't'");
  CHECK(err("\n\n  [nul") == "[op] invalid JSON at line 3, column 4: expected a value, got 'n'");
  CHECK(err("[\"a\nb\"]") == "[op] invalid JSON at line 1, column 4: a control character inside a string must be escaped, got byte 0x0a");
  CHECK(err("[\"a") == "[op] invalid JSON at line 1, column 4: expected the closing '\"' of a string, got the end of the text");
  CHECK(err("[\"\\x\"]") == "[op] invalid JSON at line 1, column 4: expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u), got 'x'");
  CHECK(err("[\"\\u12G4\"]") == "[op] invalid JSON at line 1, column 7: expected 4 hex digits after \\u, got 'G'");
  CHECK(err("[\"\\udc00\"]") == "[op] invalid JSON at line 1, column 9: a lone low surrogate \\u escape");
  CHECK(err("[\"\\ud800x\"]") == "[op] invalid JSON at line 1, column 9: a high surrogate \\u escape not followed by a low one");
  CHECK(err("[\"\\ud800\\u0041\"]") == "[op] invalid JSON at line 1, column 15: a high surrogate \\u escape not followed by a low one");
  CHECK(err("{\"k\": 1, \"j\": 2, \"k\": 3}") == "[op] invalid JSON at line 1, column 24: the key \"k\" appears twice in one object");
  CHECK(err("[1] [2]") == "[op] invalid JSON at line 1, column 5: expected the end of the document after the value, got '['");
  CHECK(err("[\"\xC3\"]") == "[op] invalid JSON: the text is not valid UTF-8");
  CHECK(err("\xEF\xBB\xBF[]") == "[op] invalid JSON at line 1, column 1: expected a value, got byte 0xef");  // no BOM
  const std::string deep(io::kMaxJsonDepth + 1, '[');
  CHECK(err(deep) == "[op] invalid JSON at line 1, column 257: nesting deeper than 256 arrays and objects");
  const std::string just_deep_enough = std::string(io::kMaxJsonDepth, '[') + std::string(io::kMaxJsonDepth, ']');
  CHECK(err(just_deep_enough).empty());
}

TEST_CASE("read_json_file reads a file and names its path in errors") {
  test::TempDir dir;
  std::ofstream(dir / "a.json") << "{\"x\": [1, 2]}";
  CHECK(io::read_json_file(dir / "a.json", "op").find("x")->as_array().size() == 2);
  std::ofstream(dir / "bad.json") << "{\"x\": }";
  CHECK(error_of([&] { io::read_json_file(dir / "bad.json", "op"); }) ==
        "[op] '" + (dir / "bad.json").string() + "': invalid JSON at line 1, column 7: expected a value, got '}'");
  CHECK(error_of([&] { io::read_json_file(dir.path(), "op"); }) ==
        "[op] '" + dir.path().string() + "' is a directory; expected a regular file");
}
