// The sharded checkpoint layout's file names, and the folder listing built on them.
#include "distributed/sharded_layout.h"

#include <system_error>

#include "tensor/error.h"

namespace weft::distributed {

namespace {

// Reads a decimal number at the front of `text` and drops it; false when there is none.
bool take_number(std::string_view& text) {
  size_t digits = 0;
  while (digits < text.size() && digits < 9 && text[digits] >= '0' && text[digits] <= '9') ++digits;
  text.remove_prefix(digits);
  return digits > 0;
}

}  // namespace

bool is_sharded_layout_file_name(std::string_view name) {
  if (name == kShardedCompleteFile) return true;
  const auto take = [&](std::string_view prefix) {
    if (name.substr(0, prefix.size()) != prefix) return false;
    name.remove_prefix(prefix.size());
    return true;
  };
  return take("shard-") && take_number(name) && take("-of-") && take_number(name) && name == ".safetensors";
}

std::vector<std::pair<std::string, bool>> sharded_folder_entries(const std::filesystem::path& folder) {
  std::vector<std::pair<std::string, bool>> entries;
  std::error_code ec;
  std::filesystem::directory_iterator it(folder, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code kind;
    entries.emplace_back(name, it->is_regular_file(kind) && !it->is_symlink(kind) && is_sharded_layout_file_name(name));
  }
  WEFT_CHECK(!ec, "[FullyShardedDataParallel] cannot list ", folder, ": ", ec.message());
  return entries;
}

bool is_sharded_checkpoint(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  for (const auto& [name, ours] : sharded_folder_entries(path))
    if (ours) return true;
  return false;
}

}  // namespace weft::distributed
