// TCP sockets with deadlines: poll() before every read and write.
#include "distributed/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "tensor/error.h"

namespace weft::distributed::detail {
namespace {

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events`; false when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    WEFT_CHECK(errno == EINTR, "[socket] poll failed: ", std::strerror(errno));
  }
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

void Socket::send_all(const void* data, size_t n, Clock::time_point deadline, const std::string& what) const {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    WEFT_CHECK(wait_ready(fd_, POLLOUT, deadline), "[", what, "] timed out sending (the peer is not reading)");
    const ssize_t sent = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    WEFT_CHECK(sent > 0, "[", what, "] connection lost while sending: ", std::strerror(errno));
    p += sent;
    n -= static_cast<size_t>(sent);
  }
}

void Socket::recv_all(void* data, size_t n, Clock::time_point deadline, const std::string& what) const {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    WEFT_CHECK(wait_ready(fd_, POLLIN, deadline), "[", what, "] timed out waiting for a reply (the peer is not answering)");
    const ssize_t got = ::recv(fd_, p, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    WEFT_CHECK(got != 0, "[", what, "] connection closed by the peer");
    WEFT_CHECK(got > 0, "[", what, "] connection lost while receiving: ", std::strerror(errno));
    p += got;
    n -= static_cast<size_t>(got);
  }
}

std::string Socket::local_address() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  WEFT_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "[socket] getsockname failed: ",
             std::strerror(errno));
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof(text));
    return text;
  }
  const auto& a6 = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    ::inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof(text));
    return text;
  }
  ::inet_ntop(AF_INET6, &a6, text, sizeof(text));
  return text;
}

Socket connect_to(const std::string& host, uint16_t port, Clock::time_point deadline, const WaitNotice& notice) {
  const std::string where = host + ":" + std::to_string(port);
  std::string last_error = "no address";
  auto pause = std::chrono::milliseconds(5);
  const auto start = Clock::now();
  const auto seconds = [](Clock::duration d) { return std::chrono::round<std::chrono::seconds>(d).count(); };
  auto next_notice = start + notice.first;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      last_error = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!s.valid()) continue;
        int err = ::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
          err = ETIMEDOUT;
          if (wait_ready(s.fd(), POLLOUT, deadline)) {
            socklen_t len = sizeof(err);
            ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
          }
        }
        if (err == 0) {
          ::freeaddrinfo(found);
          const int one = 1;
          ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          return s;
        }
        last_error = std::strerror(err);
      }
      ::freeaddrinfo(found);
    }
    const auto now = Clock::now();
    WEFT_CHECK(now + pause < deadline, "[store] ", notice.who, " cannot connect to ", where, " within its ",
               seconds(deadline - start), " s timeout: ", last_error,
               " (is the rank or launcher that hosts the store running?)");
    if (now >= next_notice) {
      const std::string line =
          weft::detail::cat("[store] ", notice.who, " is waiting for the store at ", where, " (", last_error, "); ",
                            seconds(deadline - now), " s left of its ", seconds(deadline - start),
                            " s timeout. Is the rank or launcher that hosts it (MASTER_ADDR:MASTER_PORT) running?\n");
      std::fputs(line.c_str(), stderr);
      next_notice = now + notice.every;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

Socket listen_on(uint16_t port, uint16_t& bound_port) {
  const int one = 1;
  const int zero = 0;
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.valid()) {
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(port);
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) s = Socket();
  }
  if (!s.valid()) {
    s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    WEFT_CHECK(s.valid(), "[store] cannot create a socket: ", std::strerror(errno));
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    WEFT_CHECK(::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "[store] cannot listen on port ", port,
               ": ", std::strerror(errno), " (is another job using it? pick another MASTER_PORT)");
  }
  WEFT_CHECK(::listen(s.fd(), 1024) == 0, "[store] listen failed: ", std::strerror(errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return s;
}

}  // namespace weft::distributed::detail
