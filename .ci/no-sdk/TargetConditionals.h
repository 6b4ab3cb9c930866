/* The one macOS SDK header ring's C still includes when built with no C
 * library's headers (RING_CORE_NOSTDLIBINC; stdint.h and stddef.h are the
 * compiler's own). .ci/run checks the workspace for macOS without the SDK:
 * ring's C is compiled freestanding and never linked. The values are the
 * SDK's for macOS. */
#ifndef CORO_CI_TARGET_CONDITIONALS_H
#define CORO_CI_TARGET_CONDITIONALS_H
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#endif
