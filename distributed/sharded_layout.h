// The file names of a sharded checkpoint folder (Note [Sharded checkpoint layout] in
// distributed/fsdp_sharded_checkpoint.cpp): COMPLETE and shard-<r>-of-<n>.safetensors. They need
// no process group, so they live in the core library, where a single-file loader recognises such a
// folder and names it, and the sharded save uses them to tell its own files from a user's.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::distributed {

inline constexpr const char* kShardedCompleteFile = "COMPLETE";

// True for the names the layout writes: COMPLETE and shard-<r>-of-<n>.safetensors.
bool is_sharded_layout_file_name(std::string_view name);
// The names in `folder`, each with whether it is a file the layout writes (a regular file, not a
// link, named as the layout names its files).
std::vector<std::pair<std::string, bool>> sharded_folder_entries(const std::filesystem::path& folder);
// True when `path` is a folder holding a sharded checkpoint, finished or not (its COMPLETE marker
// or a shard file): what a single-file loader names when it refuses one.
bool is_sharded_checkpoint(const std::filesystem::path& path);

}  // namespace weft::distributed
