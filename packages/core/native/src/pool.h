// attnlab native kernels: a small persistent thread team (no OpenMP regions).
//
// A kernel splits its work into `units` whose results do not depend on which thread runs them;
// `run` publishes the job, the calling thread starts claiming units at once (an atomic counter)
// and the workers join as soon as they see the job. The caller waits only for units that were
// claimed, never for a worker to arrive: when the other cores are busy (or a worker is still
// waking up) the caller simply does more of the units itself, so a job is never much slower than
// on one thread. Workers spin for a short while after each job (the gaps between the kernels of a
// training step are tens to hundreds of microseconds) and then sleep on a condition variable.
//
// Why not OpenMP: with passive waits (needed on a shared machine) every parallel region paid
// ~50 us to wake its team, and a region's end barrier waits for every thread, so a descheduled
// worker stalls the caller (with spinning waits, 10-20x slower steps on a busy machine).
#pragma once
#include <cstdint>
#include <type_traits>

namespace attn {
namespace pool {

using UnitFn = void (*)(void* context, int64_t unit);

// Threads in the team including the caller (>= 1). Resizing joins or starts workers; call it
// only between kernels.
void setThreads(int n);
int threads();

// Runs fn(context, u) for every u in [0, units), on the team. Returns when all are done.
void runUnits(int64_t units, UnitFn fn, void* context);

// Convenience: f(u) for u in [0, units).
template <class F>
inline void run(int64_t units, F&& f) {
  if (units <= 0) return;
  if (units == 1 || threads() <= 1) {
    for (int64_t u = 0; u < units; u++) f(u);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  runUnits(units, [](void* c, int64_t u) { (*static_cast<Fn*>(c))(u); }, const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace pool
}  // namespace attn
