#include "mltune/caches.hpp"

namespace mltune {

namespace {
thread_local Caches *t_current = nullptr; // see CachesInUse
} // namespace

Caches::~Caches() {
  while (!slots_.empty()) {
    slots_.pop_back();
  }
}

Caches *Caches::current() {
  return t_current;
}

CachesInUse::CachesInUse(Caches &c) : prev_(t_current) {
  t_current = &c;
}

CachesInUse::~CachesInUse() {
  t_current = prev_;
}

} // namespace mltune
