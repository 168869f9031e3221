// ThreadIndex (mltune/service.hpp): the node's thread names kept from proc
// connector events, so that a resident mltunectl does not read every
// /proc/PID/task/TID/comm of the node for each switch.
#include "base/proc.hpp"
#include "mltune/service.hpp"

#include <string>
#include <utility>

namespace mltune {

ThreadIndex::ThreadIndex(std::unique_ptr<ProcEventSource> events, Sysroot root)
    : events_(std::move(events)), root_(std::move(root)) {
  scan();
}

Result<std::unique_ptr<ThreadIndex>> ThreadIndex::open() {
  auto src = open_proc_connector();
  if (!src) {
    return src.error();
  }
  return std::make_unique<ThreadIndex>(std::move(*src), Sysroot("/"));
}

void ThreadIndex::scan() {
  threads_.clear();
  for (auto &t : proc::scan_task_names(root_)) {
    threads_[t.tid] = {t.pid, true, std::move(t.comm)};
  }
  lost_ = false;
  ++counts_.scans;
}

void ThreadIndex::handle(const ProcEvent &ev) {
  ++counts_.events;
  switch (ev.kind) {
  case ProcEvent::Kind::fork:
    // A new thread has its creator's name, and the event does not say which
    // thread created it: read when asked for.
    threads_[ev.tid] = {ev.pid, false, {}};
    break;
  case ProcEvent::Kind::exec: {
    // exec ends every other thread of the process; the one that ran exec
    // takes the process's ID without an exit event for its own.
    for (auto it = threads_.lower_bound(0); it != threads_.end();) {
      it = it->second.pid == ev.pid && it->first != ev.pid ? threads_.erase(it) : std::next(it);
    }
    threads_[ev.pid] = {ev.pid, false, {}};
    break;
  }
  case ProcEvent::Kind::comm: threads_[ev.tid] = {ev.pid, true, ev.comm}; break;
  case ProcEvent::Kind::exit: threads_.erase(ev.tid); break;
  }
}

Status ThreadIndex::drain() {
  while (true) {
    auto batch = events_->wait(0);
    if (!batch) {
      lost_ = true; // the next read scans
      return batch.error();
    }
    if (batch->lost) {
      lost_ = true;
      continue; // what is still queued is newer than the drop: keep reading
    }
    if (batch->idle && batch->events.empty()) {
      return {};
    }
    if (!lost_) {
      for (const auto &ev : batch->events) {
        handle(ev);
      }
    }
  }
}

Result<std::vector<std::pair<int, ThreadIndex::Thread>>> ThreadIndex::threads() {
  if (auto st = drain(); !st) {
    return st.error();
  }
  if (lost_) {
    scan();
  }
  std::vector<std::pair<int, Thread>> out;
  out.reserve(threads_.size());
  for (auto it = threads_.begin(); it != threads_.end();) {
    auto &[tid, t] = *it;
    if (!t.named) {
      auto comm = root_.read("/proc/" + std::to_string(t.pid) + "/task/" + std::to_string(tid) + "/comm");
      ++counts_.names_read;
      if (!comm) {
        it = threads_.erase(it); // gone; its exit event is on its way
        continue;
      }
      if (!comm->empty() && comm->back() == '\n') {
        comm->pop_back();
      }
      t.comm = std::move(*comm);
      t.named = true;
    }
    out.emplace_back(tid, t);
    ++it;
  }
  return out;
}

namespace {

// The installed index as base's source of thread names (proc::task_names).
class IndexNames final : public proc::TaskNameSource {
public:
  ThreadIndex *index = nullptr;
  std::optional<std::vector<proc::TaskName>> names(const Sysroot &root) override {
    if (index == nullptr || index->root().root() != root.root()) {
      return std::nullopt;
    }
    auto threads = index->threads();
    if (!threads) {
      return std::nullopt;
    }
    std::vector<proc::TaskName> out;
    out.reserve(threads->size());
    for (auto &[tid, t] : *threads) {
      out.push_back({t.pid, tid, std::move(t.comm)});
    }
    return out;
  }
};

} // namespace

void install_thread_index(Caches &caches, ThreadIndex *index) {
  auto &names = caches.slot<IndexNames>();
  names.index = index;
  proc::install_task_name_source(caches, index != nullptr ? &names : nullptr);
}

} // namespace mltune
