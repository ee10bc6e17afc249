// attnlab native kernels: the thread team (see pool.h).
#include "pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <xmmintrin.h>
inline void cpuRelax() { _mm_pause(); }
// Workers run with flush-to-zero / denormals-are-zero like the caller (addon.cc's guard).
inline void setFtz() { _mm_setcsr(_mm_getcsr() | 0x8040); }
#elif defined(__aarch64__)
inline void cpuRelax() { asm volatile("yield"); }
inline void setFtz() {}
#else
inline void cpuRelax() {}
inline void setFtz() {}
#endif

namespace attn {
namespace pool {

namespace {

using Clock = std::chrono::steady_clock;

// How long a worker spins for the next job before sleeping (ATTNLAB_NATIVE_SPIN_US overrides).
int64_t spinMicros() {
  static const int64_t us = [] {
    const char* v = std::getenv("ATTNLAB_NATIVE_SPIN_US");
    if (v != nullptr && *v != '\0') return (int64_t)std::max(0L, std::strtol(v, nullptr, 10));
    return (int64_t)200;
  }();
  return us;
}

struct Team {
  // (generation << 32) | next unit to claim. A claim is a compare-exchange that also checks the
  // generation, so a worker that saw an old job never claims a unit of a newer one.
  std::atomic<uint64_t> next{0};
  std::atomic<UnitFn> fn{nullptr};
  std::atomic<void*> context{nullptr};
  std::atomic<int64_t> units{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::thread> workers;
  uint32_t generation = 0;  // the caller's side only
  int size = 1;
};

// Never destroyed: workers may still be asleep when the process exits.
Team& team() {
  static Team* t = new Team();
  return *t;
}

inline uint32_t generationOf(uint64_t v) { return (uint32_t)(v >> 32); }

// Claims and runs units of job `generation` until none are left (or the job was replaced).
void work(Team& t, uint32_t generation) {
  const UnitFn fn = t.fn.load();
  void* const context = t.context.load();
  const int64_t units = t.units.load();
  uint64_t v = t.next.load();
  for (;;) {
    if (generationOf(v) != generation || (int64_t)(uint32_t)v >= units) return;
    if (!t.next.compare_exchange_weak(v, v + 1)) continue;
    fn(context, (int64_t)(uint32_t)v);
    t.done.fetch_add(1, std::memory_order_release);
    v = t.next.load();
  }
}

void workerMain(Team* t) {
  setFtz();
  uint32_t seen = generationOf(t->next.load());
  auto idleSince = Clock::now();
  int polls = 0;
  for (;;) {
    if (t->stop.load(std::memory_order_relaxed)) return;
    const uint64_t v = t->next.load(std::memory_order_acquire);
    if (generationOf(v) != seen) {
      seen = generationOf(v);
      work(*t, seen);
      idleSince = Clock::now();
      polls = 0;
      continue;
    }
    cpuRelax();
    if (++polls % 64 != 0) continue;
    if (Clock::now() - idleSince < std::chrono::microseconds(spinMicros())) continue;
    std::unique_lock<std::mutex> lock(t->mutex);
    t->sleepers.fetch_add(1);
    t->wake.wait(lock, [&] { return generationOf(t->next.load()) != seen || t->stop.load(); });
    t->sleepers.fetch_sub(1);
    idleSince = Clock::now();
    polls = 0;
  }
}

void stopWorkers(Team& t) {
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.stop.store(true);
  }
  t.wake.notify_all();
  for (auto& w : t.workers) w.join();
  t.workers.clear();
  t.stop.store(false);
}

}  // namespace

void setThreads(int n) {
  Team& t = team();
  n = std::max(1, n);
  if (n == t.size) return;
  stopWorkers(t);
  t.size = 1;
  for (int i = 1; i < n; i++) {
    try {
      t.workers.emplace_back(workerMain, &t);
    } catch (...) {
      break;  // no threads here: run with what we have
    }
  }
  t.size = 1 + (int)t.workers.size();
}

int threads() { return team().size; }

void runUnits(int64_t units, UnitFn fn, void* context) {
  Team& t = team();
  // One job at a time: a second caller (another JS thread using the addon, or a unit that runs a
  // parallel kernel itself) runs its units inline instead of waiting or corrupting the job.
  static std::atomic<bool> busy{false};
  if (t.size <= 1 || units <= 1 || busy.exchange(true, std::memory_order_acquire)) {
    for (int64_t u = 0; u < units; u++) fn(context, u);
    return;
  }
  struct Release {
    ~Release() { busy.store(false, std::memory_order_release); }
  } release;
  t.done.store(0);
  t.fn.store(fn);
  t.context.store(context);
  t.units.store(units);
  const uint32_t generation = ++t.generation;
  t.next.store((uint64_t)generation << 32);
  if (t.sleepers.load() > 0) {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.wake.notify_all();
  }
  work(t, generation);
  // Only units already claimed by a worker can be outstanding.
  int polls = 0;
  while (t.done.load(std::memory_order_acquire) < units) {
    cpuRelax();
    if (++polls > 4096) std::this_thread::yield();
  }
}

}  // namespace pool
}  // namespace attn
