// The TCPStore client (Note [Store wire protocol] in tcp_store.h). The server is in
// tcp_store_server.cpp.
#include "distributed/tcp_store.h"

#include <cstring>

#include "tensor/error.h"

namespace weft::distributed {
namespace {

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void put_bytes(std::string& out, const std::string& bytes) {
  put_u64(out, bytes.size());
  out += bytes;
}

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, Milliseconds timeout, std::shared_ptr<TCPStoreServer> server,
                   const std::string& who)
    : Store(timeout), host_(std::move(host)), port_(port), server_(std::move(server)) {
  detail::WaitNotice notice;
  notice.who = who;
  socket_ = detail::connect_to(host_, port_, detail::Clock::now() + timeout, notice);
  std::string hello;
  put_u8(hello, static_cast<uint8_t>(detail::Query::Validate));
  const uint32_t magic = detail::kValidationMagic;
  hello.append(reinterpret_cast<const char*>(&magic), sizeof(magic));
  send(hello);
}

std::shared_ptr<TCPStore> TCPStore::host(uint16_t port, Milliseconds timeout) {
  auto server = std::make_shared<TCPStoreServer>(port);
  const uint16_t bound = server->port();
  return std::make_shared<TCPStore>("127.0.0.1", bound, timeout, std::move(server));
}

std::string TCPStore::local_address() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return socket_.local_address();
}

void TCPStore::send(const std::string& bytes) {
  socket_.send_all(bytes.data(), bytes.size(), detail::Clock::now() + timeout(), describe());
}

template <class T>
T TCPStore::receive() {
  T value{};
  socket_.recv_all(&value, sizeof(value), detail::Clock::now() + timeout(), describe());
  return value;
}

std::string TCPStore::receive_bytes() {
  const auto n = receive<uint64_t>();
  WEFT_CHECK(n <= (uint64_t{1} << 32), "[", describe(), "] reply announces ", n, " bytes; refusing");
  std::string bytes(n, '\0');
  socket_.recv_all(bytes.data(), n, detail::Clock::now() + timeout(), describe());
  return bytes;
}

void TCPStore::set(const std::string& key, const std::string& value) {
  std::string msg;
  put_u8(msg, static_cast<uint8_t>(detail::Query::Set));
  put_bytes(msg, key);
  put_bytes(msg, value);
  std::lock_guard<std::mutex> lock(mutex_);
  send(msg);
}

std::string TCPStore::get_existing(const std::string& key) {
  std::string msg;
  put_u8(msg, static_cast<uint8_t>(detail::Query::Get));
  put_bytes(msg, key);
  std::lock_guard<std::mutex> lock(mutex_);
  send(msg);
  return receive_bytes();
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::string msg;
  put_u8(msg, static_cast<uint8_t>(detail::Query::Add));
  put_bytes(msg, key);
  msg.append(reinterpret_cast<const char*>(&delta), sizeof(delta));
  std::lock_guard<std::mutex> lock(mutex_);
  send(msg);
  return receive<int64_t>();
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::string msg;
  put_u8(msg, static_cast<uint8_t>(detail::Query::Check));
  put_u64(msg, keys.size());
  for (const auto& key : keys) put_bytes(msg, key);
  std::lock_guard<std::mutex> lock(mutex_);
  send(msg);
  return receive<uint8_t>() == 0;
}

bool TCPStore::remove(const std::string& key) {
  std::string msg;
  put_u8(msg, static_cast<uint8_t>(detail::Query::Delete));
  put_bytes(msg, key);
  std::lock_guard<std::mutex> lock(mutex_);
  send(msg);
  return receive<int64_t>() > 0;
}

}  // namespace weft::distributed
