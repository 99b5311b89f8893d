// thread_names(): the names of this process's threads, as /proc/self/task/*/comm holds them
// (empty off Linux). Tests that check which threads weft starts ask through this one helper.
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

inline std::set<std::string> thread_names() {
  std::set<std::string> names;
#if defined(__linux__)
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.insert(name);
  }
#endif
  return names;
}
