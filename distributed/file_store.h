// FileStore: a store kept as files in one folder, for ranks that share a file system (one machine,
// or several with an NFS folder) and want no server. `init_method = "file:///shared/run1"`.
//
// One file per key (names hex-escaped where not [A-Za-z0-9_.-]). A value is written to a
// temporary file and renamed over the key's file, so a reader sees the whole old value or the
// whole new one. add() holds an exclusive flock on the folder's lock file while it reads, adds and
// renames. Use a fresh folder per job: keys left by an earlier job would be read as current.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "distributed/store.h"

namespace weft::distributed {

class FileStore final : public Store {
 public:
  // Creates the folder when missing.
  explicit FileStore(std::filesystem::path folder, Milliseconds timeout = kDefaultStoreTimeout);

  void set(const std::string& key, const std::string& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::string describe() const override { return "file store " + folder_.string(); }
  std::shared_ptr<Store> clone() const override { return std::make_shared<FileStore>(folder_, timeout()); }

  const std::filesystem::path& folder() const { return folder_; }

 protected:
  std::string get_existing(const std::string& key) override;

 private:
  std::filesystem::path path_of(const std::string& key) const;
  void write_file(const std::filesystem::path& path, const std::string& value);

  std::filesystem::path folder_;
};

}  // namespace weft::distributed
