// The umbrella header: everything a memgrad program uses.
#pragma once

#include "allocator/config.h"
#include "allocator/error.h"
#include "allocator/trace.h"
#include "engine/copy.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/elementwise.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/generator.h"
#include "engine/indexing.h"
#include "engine/linalg.h"
#include "engine/memory.h"
#include "engine/reduce.h"
#include "engine/tensor.h"
#include "engine/views.h"
