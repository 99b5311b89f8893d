// Blocking TCP sockets with a deadline on every call, for the store's client and server.
//
// Every send and receive polls until its deadline instead of blocking forever, so a store whose
// server died or stopped turns into an error that names the peer. Connecting retries refused
// connections until the deadline, because ranks start in any order and the server may not be
// listening yet. Sockets are close-on-exec (a launcher's store must not leak into its ranks).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::distributed::detail {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // `what` names the peer in errors ("tcp store 10.0.0.1:29500").
  void send_all(const void* data, size_t n, Clock::time_point deadline, const std::string& what) const;
  void recv_all(void* data, size_t n, Clock::time_point deadline, const std::string& what) const;

  // The IP address of this end of a connected socket ("10.77.0.2"): the address that reaches the
  // peer, which is what a rank should bind its collectives to.
  std::string local_address() const;

 private:
  int fd_ = -1;
};

// What a connection that keeps failing says on stderr while it retries, so that a rank whose
// master never answers is not silent for the whole timeout (PyTorch's is 30 minutes): who is
// waiting, for which address, why, and the time left; first after `first`, then every `every`.
struct WaitNotice {
  std::string who = "this process";  // "rank 1 of 2"
  std::chrono::milliseconds first{2'000};
  std::chrono::milliseconds every{30'000};
};

// Connects to host:port (IPv4 or IPv6, numeric or a name), retrying until the deadline.
Socket connect_to(const std::string& host, uint16_t port, Clock::time_point deadline, const WaitNotice& notice = {});

// Listens on every local address (IPv6 with IPv4 mapped, or IPv4 only where IPv6 is absent).
// Port 0 picks a free port; `bound_port` receives the port in use.
Socket listen_on(uint16_t port, uint16_t& bound_port);

}  // namespace weft::distributed::detail
