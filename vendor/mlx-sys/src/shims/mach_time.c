/* quest patch: mlx-rs seeds its RNG with Apple's mach_approximate_time(); other
 * platforms get a monotonic nanosecond clock under the same name. */
#include <stdint.h>
#include <time.h>

uint64_t mach_approximate_time(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}
