/* tools/launch_floor.py's timing loop: n calls of cuLaunchKernel (given by address) from C, ns per call. */
#include <stdint.h>
#include <time.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned smem, void *stream, void **params, void **extra);

double launch_loop(void *launch, void *f, unsigned gx, unsigned bx, unsigned smem, void *stream, void **params, int n,
                   int *rc) {
    launch_fn fn = (launch_fn)launch;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        int r = fn(f, gx, 1, 1, bx, 1, 1, smem, stream, params, 0);
        if (r) {
            *rc = r;
            return -1.0;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *rc = 0;
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}
