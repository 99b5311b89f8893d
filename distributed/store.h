// Store: the small key-value service ranks meet through before they can talk to each other
// (rendezvous), and keep using for what must not depend on the collectives themselves: the
// NCCL unique id, heartbeats, and a launcher's note that a rank has exited.
//
// Values are bytes (held in std::string). Every blocking call has a deadline: get() and wait()
// give up after `timeout` and name the missing keys and the store. add() is atomic across all
// clients, which barriers and counters rely on; a key written by add() holds the decimal number,
// as PyTorch's TCPStore keeps it.
//
// Two implementations: TCPStore (tcp_store.h: PyTorch's wire protocol, so a weft rank can join the
// store torchrun's agent hosts) and FileStore (file_store.h: a folder on a shared file system).
// PrefixStore puts a namespace in front of another store, so that process groups and restarts
// never read each other's stale keys.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::distributed {

using Milliseconds = std::chrono::milliseconds;

inline constexpr Milliseconds kDefaultStoreTimeout{300'000};

class Store {
 public:
  explicit Store(Milliseconds timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists, then returns its value; throws after `timeout`.
  std::string get(const std::string& key) { return get(key, timeout_); }
  virtual std::string get(const std::string& key, Milliseconds timeout);
  // Adds `delta` to the number under `key` (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when every key exists; never blocks for long.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists; throws after `timeout`, naming the keys still missing.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout);
  // Returns whether the key existed.
  virtual bool remove(const std::string& key) = 0;

  // Another handle on the same store with its own connection, for a thread that must never wait
  // behind another's request (heartbeats).
  virtual std::shared_ptr<Store> clone() const = 0;

  // What the store is, for messages: "tcp store 10.0.0.1:29500", "file store /shared/run1".
  virtual std::string describe() const = 0;

  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds timeout) { timeout_ = timeout; }

 protected:
  // The value of a key known to exist (get() polls check() first, then calls this).
  virtual std::string get_existing(const std::string& key) = 0;

 private:
  Milliseconds timeout_;
};

// Every key of `inner` seen through this store is "<prefix>/<key>".
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner);

  void set(const std::string& key, const std::string& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::string describe() const override;
  std::shared_ptr<Store> clone() const override;
  const std::shared_ptr<Store>& inner() const { return inner_; }

 protected:
  std::string get_existing(const std::string& key) override;

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace weft::distributed
