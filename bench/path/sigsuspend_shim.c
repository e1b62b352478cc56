/* For scripts/bench-path: valgrind 3.19 writes to the signal mask given to sigsuspend, and
 * libdispatch's main thread passes one in read-only memory (valgrind then dies with SIGSEGV).
 * Preloaded, this sigsuspend hands the kernel a copy on the stack. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
  sigset_t copy = *mask;
  return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
