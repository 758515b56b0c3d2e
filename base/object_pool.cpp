// The per-thread lists' release at thread exit (the lists themselves are in the header).
#include "base/object_pool.h"

namespace memgrad::detail {
namespace {

// Destroyed when its thread exits: returns the thread's lists to the heap and closes them.
struct PoolRelease {
  ~PoolRelease() {
    PoolLists& lists = t_pool_lists;
    lists.closed = true;
    for (size_t cls = 1; cls < PoolLists::kClasses; ++cls) {
      while (PoolLists::FreeObject* object = lists.heads[cls]) {
        lists.heads[cls] = object->next;
        ::operator delete(object, cls* kPoolClassBytes);
      }
    }
    lists.cached_bytes = 0;
  }
};

}  // namespace

void pool_register_release() {
  thread_local PoolRelease release;
  (void)release;
  t_pool_lists.registered = true;
}

}  // namespace memgrad::detail
