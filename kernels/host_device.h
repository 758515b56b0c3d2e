// MEMGRAD_HOST_DEVICE: marks a function that both compilers build, nvcc for the host and the
// device, the C++ compiler for the host alone. The shared headers (philox.h, scalar_math.h and
// the *_formulas.h files) use it so the CPU and CUDA kernels run one definition of each formula.
#pragma once

#if defined(__CUDACC__)
#define MEMGRAD_HOST_DEVICE __host__ __device__
#else
#define MEMGRAD_HOST_DEVICE
#endif
