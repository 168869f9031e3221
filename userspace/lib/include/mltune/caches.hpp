// What a resident mltunectl (serve) keeps between the requests it runs.
//
// A one-shot command reads everything afresh.  The service owns one Caches
// object for its life and makes it current on its thread (CachesInUse).
// Each subsystem keeps its own part as a slot of it, found by type, and
// asks Caches::current() (null: no caches, read afresh):
//
//   base/sysroot.cpp       the knob files, kept open (KnobFiles)
//   base/proc.cpp          the source of thread names (the service's index)
//   profile/profile.cpp    parsed profile documents
//   nic/transport.cpp      the netlink sockets
//
// Destroying the object closes and frees what its slots hold, the newest
// slot first.  Used from one thread: the one it is current on.
#pragma once

#include <cstddef>
#include <memory>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

namespace mltune {

class Caches {
public:
  Caches() = default;
  Caches(const Caches &) = delete;
  Caches &operator=(const Caches &) = delete;
  Caches(Caches &&) = delete;
  Caches &operator=(Caches &&) = delete;
  ~Caches();

  // The slot of type T, made (value-initialised) on first use.
  template <class T> T &slot() {
    if (T *t = find<T>(); t != nullptr) {
      return *t;
    }
    auto made = std::make_shared<T>();
    T &ref = *made;
    slots_.emplace_back(std::type_index(typeid(T)), std::move(made));
    return ref;
  }

  // The slot of type T, or null where none was made.
  template <class T> [[nodiscard]] T *find() const {
    for (const auto &[type, p] : slots_) {
      if (type == std::type_index(typeid(T))) {
        return static_cast<T *>(p.get());
      }
    }
    return nullptr;
  }

  [[nodiscard]] std::size_t slots() const { return slots_.size(); }

  // The caches current on this thread, or null.
  static Caches *current();

private:
  friend class CachesInUse;
  std::vector<std::pair<std::type_index, std::shared_ptr<void>>> slots_;
};

// Makes `c` the current caches of this thread while it lives; the one
// current before comes back after.
class CachesInUse {
public:
  explicit CachesInUse(Caches &c);
  ~CachesInUse();
  CachesInUse(const CachesInUse &) = delete;
  CachesInUse &operator=(const CachesInUse &) = delete;
  CachesInUse(CachesInUse &&) = delete;
  CachesInUse &operator=(CachesInUse &&) = delete;

private:
  Caches *prev_;
};

} // namespace mltune
