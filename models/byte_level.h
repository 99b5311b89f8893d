// GPT-2's byte-level alphabet: each of the 256 byte values is shown in a byte-level BPE
// vocabulary as one printable code point (GPT-2's bytes_to_unicode): the printable bytes
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, and the other 68 bytes (space,
// control characters, U+007F..U+00A0, U+00AD), in increasing order, become U+0100, U+0101, ...
// A space is therefore 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
//
// The tokenizer works on raw bytes: it converts the vocabulary's spellings to bytes once, at load
// time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft::models::detail {

// The code point byte b is shown as.
char32_t byte_to_char(uint8_t b);

// The byte a code point stands for, or -1 when it is none of the 256.
int char_to_byte(char32_t cp);

// The raw bytes a vocabulary spelling (valid UTF-8) stands for, or nullopt when one of its
// characters is none of the 256.
std::optional<std::string> token_to_bytes(std::string_view token);

}  // namespace weft::models::detail
