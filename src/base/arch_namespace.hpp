// Each kernel translation unit (one per target, made by CMake from dispatch/kernel.cpp.in) defines
// MASKATTN_KERNEL_NS before including the kernel, so every inline function of the kernel headers
// gets an arch-specific symbol. Without it the linker may keep an AVX-512 copy of a shared inline
// helper and call it from the SSE2 path on a CPU without AVX.
#pragma once

#ifndef MASKATTN_KERNEL_NS
#define MASKATTN_KERNEL_NS generic
#endif
