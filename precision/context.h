// Context: the RAII object every precision hook that changes "how things are made or run" returns
// (tensor_init_context, module_init_context, forward_context, and the Fabric entry points built
// on them). It owns a stack of guards — tensor frames, module frames, autocast states — each
// applied when pushed and undone when the Context ends, innermost first.
//
// Invariants:
// - Guards apply eagerly: a Context is in force from the moment the hook returns, as Lightning's
//   strategy-level contexts are (reference §4.3), and until it is destroyed or exit() is called.
// - A hook builds its Context in one expression chain; if a later push throws, the guards already
//   pushed unwind with the partial Context (no leaked dtype or frame, reference PR #18716).
// - Moving a Context moves ownership, never re-applies anything.
//
// Note [Context order]: the guards change thread-local state (Note [Thread-local state] in
// tensor/init_context.h), each restoring on exit what it found on entry, so Contexts must end in
// the reverse order they began, on the thread that began them. Every thread keeps the list of its
// open Contexts, and ending one that is not the innermost is detected: the Contexts begun after
// it are ended first, innermost first, so the thread is always back to exactly its state before
// the Context began (ending those later is then a no-op). exit() then throws the error; a
// destructor cannot throw, so it reports it as a precision warning. Ending a Context on another
// thread cannot restore anything (its guards belong to the first thread): exit() throws and
// changes nothing, and a destructor aborts the program with the message, as std::thread does for
// a thread left joinable.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace weft::precision {

class Context {
 public:
  Context() = default;
  Context(Context&& other) noexcept;
  // Ends this context first (as exit()), then takes over `other`'s guards.
  Context& operator=(Context&& other);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Constructs Guard(args...) now, inside the guards already held. Only the innermost open
  // Context of the thread can grow (Note [Context order]).
  template <class Guard, class... Args>
  Context& push(Args&&... args) {
    check_innermost("push");
    auto guard = std::make_unique<Holder<Guard>>(std::forward<Args>(args)...);
    guards_.push_back(std::move(guard));
    if (guards_.size() == 1) open();
    return *this;
  }
  // Takes over `inner`'s guards, which are already inside this one's: `inner` must have begun
  // after this one, as the innermost open Context.
  Context& then(Context&& inner);

  bool empty() const { return guards_.empty(); }
  // Ends the context early (as leaving a Python `with` block). Out of order it still restores the
  // thread's state, then throws (Note [Context order]).
  void exit();

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

  void check_innermost(const char* what) const;
  // Joins the thread's open Contexts (on the first guard).
  void open();
  // Ends this Context and every one begun after it; returns how many of those there were.
  size_t end_from_here();
  // Undoes the guards, innermost first, and leaves the thread's list (which it tops).
  void unwind() noexcept;

  std::vector<std::unique_ptr<Entry>> guards_;
  std::vector<Context*>* open_list_ = nullptr;  // the thread's open Contexts while this is one
};

}  // namespace weft::precision
