// Tokenizer throughput: load time of a tokenizer.json, and encode and decode speed in MB of text
// per second, on one thread. bench/compare_tokenizer.sh runs the `tokenizers` library on the same
// files beside it (bench/tokenizer_peer.py) and prints the ratios.
//
// The text is cut into chunks of about 64 KiB after a newline (as the golden tests cut their
// corpora), and each chunk is encoded with add_special_tokens=false, then each chunk's ids decoded.
// One tokenizer serves every pass, so after the warm-up pass its word cache is full (the library's
// is too, on its side). Timing: median pass (MedianTimer) over --min-time seconds.
//
//   bench_tokenizer --tokenizer FILE --text FILE [--min-time S]
//
// Output: a table, then one line of JSON starting with {"bench":"tokenizer".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "median_timer.h"
#include "weft.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_tokenizer: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string_view> chunks(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t newline = start + (1 << 16) < text.size() ? text.find('\n', start + (1 << 16)) : std::string_view::npos;
    const size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, text_path;
  double min_time = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tokenizer_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--text")) text_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--min-time")) min_time = std::atof(argv[i + 1]);
  }
  if (tokenizer_path.empty() || text_path.empty()) {
    std::fprintf(stderr, "usage: bench_tokenizer --tokenizer FILE --text FILE [--min-time S]\n");
    return 2;
  }
  const std::string text = read_file(text_path);
  const std::vector<std::string_view> parts = chunks(text);
  const double mb = static_cast<double>(text.size()) / 1e6;

  bench::MedianTimer load([&] { weft::models::Tokenizer::from_file(tokenizer_path); });
  while (!load.done(min_time / 4)) load.call();

  std::vector<std::vector<int32_t>> ids(parts.size());
  const weft::models::Tokenizer tok = weft::models::Tokenizer::from_file(tokenizer_path);
  bench::MedianTimer encode([&] {
    for (size_t i = 0; i < parts.size(); ++i) ids[i] = tok.encode(parts[i], false);
  });
  while (!encode.done(min_time)) encode.call();
  size_t tokens = 0;
  for (const auto& v : ids) tokens += v.size();

  size_t decoded = 0;
  bench::MedianTimer decode([&] {
    decoded = 0;
    for (const auto& v : ids) decoded += tok.decode(v).size();
  });
  while (!decode.done(min_time)) decode.call();

  const double load_s = load.median();
  const double encode_s = encode.median();
  const double decode_s = decode.median();
  std::printf("%-28s %10s %12s %12s %10s\n", "tokenizer", "MB", "encode MB/s", "decode MB/s", "load ms");
  std::printf("%-28s %10.2f %12.2f %12.2f %10.1f\n", tokenizer_path.substr(tokenizer_path.rfind('/') + 1).c_str(), mb,
              mb / encode_s, mb / decode_s, load_s * 1e3);
  std::printf("{\"bench\":\"tokenizer\",\"tokenizer\":\"%s\",\"text_bytes\":%zu,\"tokens\":%zu,\"decoded_bytes\":%zu,"
              "\"load_s\":%.6f,\"encode_s\":%.6f,\"decode_s\":%.6f,\"encode_mb_s\":%.3f,\"decode_mb_s\":%.3f}\n",
              tokenizer_path.c_str(), text.size(), tokens, decoded, load_s, encode_s, decode_s, mb / encode_s, mb / decode_s);
  return 0;
}
