// Context's bookkeeping of each thread's open Contexts (Note [Context order] in context.h).
#include "precision/context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "precision/warnings.h"
#include "tensor/error.h"

namespace weft::precision {
namespace {

// Note [Thread-local state] in tensor/init_context.h: the open Contexts of this thread,
// outermost first.
std::vector<Context*>& thread_open_contexts() {
  thread_local std::vector<Context*> open;
  return open;
}

constexpr const char* kForeignThread =
    "[precision.Context] a context must end on the thread that began it; its guards changed that thread's "
    "state, which this thread cannot restore";

std::string out_of_order_message(size_t later) {
  return weft::detail::cat("[precision.Context] contexts must end in the reverse order they began: this one ended while ",
                     later, later == 1 ? " context" : " contexts", " begun after it ", later == 1 ? "was" : "were",
                     " still open; ", later == 1 ? "it was" : "they were",
                     " ended first, so the thread is back to its state before this one began");
}

}  // namespace

Context::Context(Context&& other) noexcept : guards_(std::move(other.guards_)), open_list_(other.open_list_) {
  other.guards_.clear();
  other.open_list_ = nullptr;
  if (open_list_ != nullptr) *std::find(open_list_->begin(), open_list_->end(), &other) = this;
}

Context& Context::operator=(Context&& other) {
  if (this != &other) {
    exit();
    guards_ = std::move(other.guards_);
    open_list_ = other.open_list_;
    other.guards_.clear();
    other.open_list_ = nullptr;
    if (open_list_ != nullptr) *std::find(open_list_->begin(), open_list_->end(), &other) = this;
  }
  return *this;
}

Context::~Context() {
  if (open_list_ == nullptr) return;
  if (open_list_ != &thread_open_contexts()) {
    std::fprintf(stderr, "%s\n", kForeignThread);
    std::abort();
  }
  if (const size_t later = end_from_here(); later > 0) {
    try {
      warn(out_of_order_message(later));
    } catch (...) {
      // A handler that throws cannot be honoured in a destructor; the state is restored anyway.
    }
  }
}

void Context::exit() {
  if (open_list_ == nullptr) return;
  WEFT_CHECK(open_list_ == &thread_open_contexts(), kForeignThread);
  if (const size_t later = end_from_here(); later > 0) throw Error(out_of_order_message(later));
}

Context& Context::then(Context&& inner) {
  if (inner.open_list_ == nullptr) return *this;
  std::vector<Context*>& open = *inner.open_list_;
  WEFT_CHECK(&open == &thread_open_contexts() && open.back() == &inner &&
                 (open_list_ == nullptr || (open.size() >= 2 && open[open.size() - 2] == this)),
             "[precision.Context] then: the inner context must be the innermost open one of the thread, begun "
             "right inside this one");
  for (auto& guard : inner.guards_) guards_.push_back(std::move(guard));
  inner.guards_.clear();
  inner.open_list_ = nullptr;
  open.pop_back();  // inner's entry; this one, if it was open, is now the innermost again
  if (open_list_ == nullptr) {
    open_list_ = &open;
    open.push_back(this);
  }
  return *this;
}

void Context::check_innermost(const char* what) const {
  if (open_list_ == nullptr) return;
  WEFT_CHECK(open_list_ == &thread_open_contexts() && open_list_->back() == this, "[precision.Context] ", what,
             ": only the innermost open context of its thread can take more guards");
}

void Context::open() {
  open_list_ = &thread_open_contexts();
  open_list_->push_back(this);
}

size_t Context::end_from_here() {
  std::vector<Context*>& open = *open_list_;
  const size_t later = static_cast<size_t>(open.end() - std::find(open.begin(), open.end(), this)) - 1;
  while (open.back() != this) open.back()->unwind();
  unwind();
  return later;
}

void Context::unwind() noexcept {
  while (!guards_.empty()) guards_.pop_back();
  open_list_->pop_back();
  open_list_ = nullptr;
}

}  // namespace weft::precision
