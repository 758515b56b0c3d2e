// What a Store holds: a Gloo rendezvous store. Included by the distributed .cpp files only, so
// that no public header includes Gloo.
#pragma once

#include <memory>
#include <string>

#include "distributed/store.h"
#include "memgrad_build_config.h"

#if MEMGRAD_WITH_GLOO
#include <gloo/rendezvous/store.h>
#endif

namespace memgrad::distributed {

struct Store::Impl {
#if MEMGRAD_WITH_GLOO
  std::shared_ptr<gloo::rendezvous::Store> store;
#endif
  std::string description;
  int redis_port = 0;
};

}  // namespace memgrad::distributed
