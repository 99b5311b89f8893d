// Context: the RAII object every precision hook that changes "how things are made or run" returns
// (tensor_init_context, module_init_context, forward_context, and the Fabric entry points built
// on them). It owns a stack of guards — tensor frames, module frames, autocast states — each
// applied when pushed and undone when the Context dies, innermost first.
//
// Invariants:
// - Guards apply eagerly: a Context is in force from the moment the hook returns, as Lightning's
//   strategy-level contexts are (reference §4.3), and until it is destroyed or exit() is called.
// - The guards are thread-local stacks, so Contexts must end in the reverse order they began, on
//   the thread that made them. Moving a Context moves ownership, never re-applies anything.
// - A hook builds its Context in one expression chain; if a later push throws, the guards already
//   pushed unwind with the partial Context (no leaked dtype or frame, reference PR #18716).
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace weft::precision {

class Context {
 public:
  Context() = default;
  Context(Context&& other) noexcept = default;
  Context& operator=(Context&& other) noexcept {
    if (this != &other) {
      exit();
      guards_ = std::move(other.guards_);
      other.guards_.clear();
    }
    return *this;
  }
  ~Context() { exit(); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Constructs Guard(args...) now, inside the guards already held.
  template <class Guard, class... Args>
  Context& push(Args&&... args) {
    guards_.push_back(std::make_unique<Holder<Guard>>(std::forward<Args>(args)...));
    return *this;
  }
  // Takes over `inner`'s guards, which are already inside this one's.
  Context& then(Context&& inner) {
    for (auto& guard : inner.guards_) guards_.push_back(std::move(guard));
    inner.guards_.clear();
    return *this;
  }

  bool empty() const { return guards_.empty(); }
  // Ends the context early (as leaving a Python `with` block).
  void exit() {
    while (!guards_.empty()) guards_.pop_back();
  }

 private:
  struct Entry {
    virtual ~Entry() = default;
  };
  template <class Guard>
  struct Holder final : Entry {
    template <class... Args>
    explicit Holder(Args&&... args) : guard(std::forward<Args>(args)...) {}
    Guard guard;
  };

  std::vector<std::unique_ptr<Entry>> guards_;
};

}  // namespace weft::precision
