// TCPStore: a store served over TCP by one process (rank 0, or the launcher) to all ranks.
//
// Note [Store wire protocol]: the bytes on the wire are PyTorch's TCPStore protocol (the subset
// below), so under `torchrun`, whose agent already serves a store at MASTER_ADDR:MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True), weft ranks join that store as clients, and a Python
// process can read ours. Little-endian; a string or a value is a u64 length and its bytes; every
// request starts with a u8 query type:
//   VALIDATE 0  u32 magic 0x3C85F7CE        first message of every connection; no reply
//   SET      1  key, value                  no reply
//   GET      3  key              -> value   (only asked for keys CHECK found)
//   ADD      4  key, i64 delta   -> i64     the key then holds the number in decimal
//   CHECK    5  u64 n, n keys    -> u8      0 when all exist, 1 when not
//   WAIT     6  u64 n, n keys    -> u8 0    when they all exist (server side only; our client polls CHECK)
//   DELETE   8  key              -> i64     number of keys removed
//   PING    13  u32 nonce        -> u32     the same nonce (clients of recent PyTorch send it)
// The client keeps one connection, used by one call at a time (a mutex), and every call has a
// deadline. The server is one thread polling all connections; it dies with its owner.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/socket.h"
#include "distributed/store.h"

namespace weft::distributed {

namespace detail {
// Query types and the magic number of PyTorch's TCPStore protocol (Note [Store wire protocol]).
enum class Query : uint8_t { Validate = 0, Set = 1, Get = 3, Add = 4, Check = 5, Wait = 6, Delete = 8, Ping = 13 };
inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;
}  // namespace detail

// The server: listens on `port` (0 picks one) on every local address, until destroyed.
class TCPStoreServer {
 public:
  explicit TCPStoreServer(uint16_t port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class TCPStore final : public Store {
 public:
  // Connects to a server at host:port, retrying until `timeout` (the server may start later) and
  // saying so on stderr while it waits, as `who` (detail::WaitNotice). `server`, when given, is
  // kept alive as long as this store (the process that hosts it).
  TCPStore(std::string host, uint16_t port, Milliseconds timeout = kDefaultStoreTimeout,
           std::shared_ptr<TCPStoreServer> server = nullptr, const std::string& who = "this process");
  // Starts a server on `port` (0: any free port) in this process and connects to it over loopback.
  static std::shared_ptr<TCPStore> host(uint16_t port, Milliseconds timeout = kDefaultStoreTimeout);

  void set(const std::string& key, const std::string& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::string describe() const override { return "tcp store " + host_ + ":" + std::to_string(port_); }
  // A new connection to the same server (the server itself stays owned by this store).
  std::shared_ptr<Store> clone() const override { return std::make_shared<TCPStore>(host_, port_, timeout()); }

  uint16_t port() const { return port_; }
  // The local IP address this process reaches the store from (see Socket::local_address).
  std::string local_address() const;

 protected:
  std::string get_existing(const std::string& key) override;

 private:
  void put_u8(std::string& out, uint8_t v) const { out.push_back(static_cast<char>(v)); }
  void send(const std::string& bytes);
  template <class T>
  T receive();
  std::string receive_bytes();

  std::string host_;
  uint16_t port_;
  std::shared_ptr<TCPStoreServer> server_;  // set when this store hosts the server
  mutable std::mutex mutex_;
  detail::Socket socket_;
};

}  // namespace weft::distributed
