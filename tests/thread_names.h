// thread_names(): the names of this process's threads, as /proc/self/task/*/comm holds them
// (empty off Linux), and thread_policies(): each name's scheduling policies (SCHED_OTHER,
// SCHED_BATCH, ...). Tests that check which threads weft starts ask through these helpers.
#pragma once

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

// Each thread's name with its scheduling policy (SCHED_OTHER, SCHED_BATCH, ...).
inline std::multimap<std::string, int> thread_policies() {
  std::multimap<std::string, int> policies;
#if defined(__linux__)
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    policies.emplace(name, sched_getscheduler(std::stoi(task.path().filename().string())));
  }
#endif
  return policies;
}

inline std::set<std::string> thread_names() {
  std::set<std::string> names;
  for (const auto& entry : thread_policies()) names.insert(entry.first);
  return names;
}
