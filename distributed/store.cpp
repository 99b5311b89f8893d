// The blocking calls every store shares (polling with a growing pause, up to a deadline) and the
// prefix store.
#include "distributed/store.h"

#include <algorithm>
#include <thread>

#include "tensor/error.h"

namespace weft::distributed {

std::string Store::get(const std::string& key, Milliseconds timeout) {
  wait({key}, timeout);
  return get_existing(key);
}

// Polls instead of asking the server to call back: a deadline is then a plain loop condition,
// and the pause grows from 1 ms to 20 ms so a rendezvous costs milliseconds, an idle wait little.
void Store::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(500);
  while (!check(keys)) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (const auto& key : keys)
        if (!check({key})) missing += (missing.empty() ? "'" : ", '") + key + "'";
      WEFT_FAIL("[store] timed out after ", timeout.count(), " ms waiting for key(s) ", missing, " in ",
                describe());
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
    : Store(inner ? inner->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), inner_(std::move(inner)) {
  WEFT_CHECK(inner_ != nullptr, "[PrefixStore] expected a store to wrap, got none");
}

void PrefixStore::set(const std::string& key, const std::string& value) { inner_->set(full(key), value); }
int64_t PrefixStore::add(const std::string& key, int64_t delta) { return inner_->add(full(key), delta); }
bool PrefixStore::remove(const std::string& key) { return inner_->remove(full(key)); }
std::string PrefixStore::get_existing(const std::string& key) { return inner_->get(full(key), Milliseconds(0)); }
std::shared_ptr<Store> PrefixStore::clone() const {
  auto copy = std::make_shared<PrefixStore>(prefix_, inner_->clone());
  copy->set_timeout(timeout());
  return copy;
}
std::string PrefixStore::describe() const { return inner_->describe() + " (prefix '" + prefix_ + "')"; }

bool PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& key : keys) full_keys.push_back(full(key));
  return inner_->check(full_keys);
}

}  // namespace weft::distributed
