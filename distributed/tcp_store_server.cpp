// The TCPStore server: one thread polls the listening socket, a wake-up pipe and every client.
//
// Requests are parsed from each client's input buffer as soon as they are complete (a request may
// arrive in pieces, several may arrive at once); replies go to the client's output buffer and are
// written when the socket takes them, so a slow or stopped client never blocks the others. A
// client that breaks the protocol (no VALIDATE first, a length past the limits, an unknown query)
// is disconnected. WAIT replies when the last awaited key is set.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "distributed/tcp_store.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace weft::distributed {
namespace {

constexpr uint64_t kMaxKeyBytes = 64 * 1024;
constexpr uint64_t kMaxValueBytes = 64ull * 1024 * 1024;

struct Client {
  detail::Socket socket;
  std::string in;
  std::string out;
  bool validated = false;
  std::vector<std::string> awaited;  // keys of a pending WAIT
};

// Reads little-endian fields from the front of a buffer; every read says whether the bytes are
// there yet (nullopt: wait for more) and throws on a length past the limits.
class Reader {
 public:
  explicit Reader(const std::string& buffer) : buffer_(buffer) {}
  template <class T>
  std::optional<T> value() {
    if (buffer_.size() - pos_ < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, buffer_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::optional<std::string> bytes(uint64_t limit) {
    const auto n = value<uint64_t>();
    if (!n) return std::nullopt;
    WEFT_CHECK(*n <= limit, "[tcp store server] a client sent a length of ", *n, " bytes (limit ", limit, ")");
    if (buffer_.size() - pos_ < *n) return std::nullopt;
    std::string s = buffer_.substr(pos_, *n);
    pos_ += *n;
    return s;
  }
  size_t consumed() const { return pos_; }

 private:
  const std::string& buffer_;
  size_t pos_ = 0;
};

template <class T>
void append_value(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

struct TCPStoreServer::State {
  detail::Socket listener;
  uint16_t port = 0;
  int wake_read = -1;
  int wake_write = -1;
  std::atomic<bool> stop{false};
  std::map<std::string, std::string> data;
  std::vector<Client> clients;
  std::thread thread;

  bool all_present(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!data.count(k)) return false;
    return true;
  }

  void wake_waiters() {
    for (auto& c : clients)
      if (!c.awaited.empty() && all_present(c.awaited)) {
        c.awaited.clear();
        append_value<uint8_t>(c.out, 0);
      }
  }

  // Parses and answers one request from c.in; returns false when it is not complete yet.
  bool serve_one(Client& c) {
    Reader r(c.in);
    const auto query = r.value<uint8_t>();
    if (!query) return false;
    const auto q = static_cast<detail::Query>(*query);
    if (!c.validated) {
      WEFT_CHECK(q == detail::Query::Validate, "[tcp store server] a client did not validate first");
      const auto magic = r.value<uint32_t>();
      if (!magic) return false;
      WEFT_CHECK(*magic == detail::kValidationMagic, "[tcp store server] a client sent a wrong magic number");
      c.validated = true;
    } else if (q == detail::Query::Set) {
      auto key = r.bytes(kMaxKeyBytes);
      if (!key) return false;
      auto value = r.bytes(kMaxValueBytes);
      if (!value) return false;
      data[*key] = std::move(*value);
      wake_waiters();
    } else if (q == detail::Query::Get) {
      auto key = r.bytes(kMaxKeyBytes);
      if (!key) return false;
      const auto it = data.find(*key);
      const std::string value = it == data.end() ? std::string() : it->second;
      append_value<uint64_t>(c.out, value.size());
      c.out += value;
    } else if (q == detail::Query::Add) {
      auto key = r.bytes(kMaxKeyBytes);
      if (!key) return false;
      const auto delta = r.value<int64_t>();
      if (!delta) return false;
      auto& text = data[*key];
      const int64_t now = (text.empty() ? 0 : std::stoll(text)) + *delta;
      text = std::to_string(now);
      append_value<int64_t>(c.out, now);
      wake_waiters();
    } else if (q == detail::Query::Check || q == detail::Query::Wait) {
      const auto n = r.value<uint64_t>();
      if (!n) return false;
      WEFT_CHECK(*n <= 128 * 1024, "[tcp store server] a client asked for ", *n, " keys");
      std::vector<std::string> keys;
      for (uint64_t i = 0; i < *n; ++i) {
        auto key = r.bytes(kMaxKeyBytes);
        if (!key) return false;
        keys.push_back(std::move(*key));
      }
      if (q == detail::Query::Check) append_value<uint8_t>(c.out, all_present(keys) ? 0 : 1);
      else if (all_present(keys)) append_value<uint8_t>(c.out, 0);
      else c.awaited = std::move(keys);
    } else if (q == detail::Query::Delete) {
      auto key = r.bytes(kMaxKeyBytes);
      if (!key) return false;
      append_value<int64_t>(c.out, static_cast<int64_t>(data.erase(*key)));
    } else if (q == detail::Query::Ping) {
      const auto nonce = r.value<uint32_t>();
      if (!nonce) return false;
      append_value<uint32_t>(c.out, *nonce);
    } else {
      WEFT_FAIL("[tcp store server] unsupported query type ", static_cast<int>(*query));
    }
    c.in.erase(0, r.consumed());
    return true;
  }

  // Reads what the client sent and serves every complete request; false drops the client.
  bool on_readable(Client& c) {
    char chunk[64 * 1024];
    const ssize_t got = ::recv(c.socket.fd(), chunk, sizeof(chunk), MSG_DONTWAIT);
    if (got < 0) return errno == EINTR || errno == EAGAIN;
    if (got == 0) return false;
    c.in.append(chunk, static_cast<size_t>(got));
    try {
      while (serve_one(c)) {
      }
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }

  bool on_writable(Client& c) {
    const ssize_t sent = ::send(c.socket.fd(), c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0) return errno == EINTR || errno == EAGAIN;
    c.out.erase(0, static_cast<size_t>(sent));
    return true;
  }

  void run() {
    weft::detail::name_this_thread("weft-store");
    while (!stop.load()) {
      std::vector<pollfd> fds{{wake_read, POLLIN, 0}, {listener.fd(), POLLIN, 0}};
      for (const auto& c : clients)
        fds.push_back({c.socket.fd(), static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) clients.push_back(Client{detail::Socket(fd), {}, {}, false, {}});
      }
      std::vector<bool> keep(clients.size(), true);
      for (size_t i = 0; i + 2 < fds.size(); ++i) {
        const short ev = fds[i + 2].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) keep[i] = on_readable(clients[i]);
        if (keep[i] && (ev & POLLOUT)) keep[i] = on_writable(clients[i]);
      }
      // Replies may have been queued for clients other than the one that was served (WAIT).
      for (size_t i = 0; i < keep.size(); ++i)
        if (keep[i] && !clients[i].out.empty()) keep[i] = on_writable(clients[i]);
      for (size_t i = keep.size(); i-- > 0;)
        if (!keep[i]) clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
};

TCPStoreServer::TCPStoreServer(uint16_t port) : state_(std::make_unique<State>()) {
  state_->listener = detail::listen_on(port, state_->port);
  int fds[2];
  WEFT_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "[tcp store server] pipe failed: ", std::strerror(errno));
  state_->wake_read = fds[0];
  state_->wake_write = fds[1];
  state_->thread = std::thread([s = state_.get()] { s->run(); });
}

TCPStoreServer::~TCPStoreServer() {
  state_->stop = true;
  const char byte = 1;
  [[maybe_unused]] const ssize_t w = ::write(state_->wake_write, &byte, 1);
  state_->thread.join();
  ::close(state_->wake_read);
  ::close(state_->wake_write);
}

uint16_t TCPStoreServer::port() const { return state_->port; }

}  // namespace weft::distributed
