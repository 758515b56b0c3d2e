// The umbrella header for autograd: grad modes, backward/grad, hooks, gradcheck, errors.
#pragma once

#include "autograd/autocast.h"
#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/error.h"
#include "autograd/grad_mode.h"
#include "autograd/grad_scaler.h"
#include "autograd/gradcheck.h"
#include "autograd/hooks.h"
#include "engine/memgrad.h"
