/* ptxgen.runtime._launcher: libcuda. cuLaunchKernel and cuStreamIsCapturing are dlopen'ed from libcuda.so.1 at first
 * use (no CUDA header: their prototypes are launch_fn and capture_fn in _launcher.h); a launch and a capture query
 * retry once where the thread had no (or another) current context (switching back
 * afterwards); the calling stream's remembered workspace (stream_workspace). See _launcher.h for the files of the
 * module. */
#include "_launcher.h"
#ifndef _WIN32
#include <dlfcn.h>
#endif

launch_fn driver_launch = NULL;
capture_fn driver_capture = NULL;

int find_driver(void) {
    if (driver_launch)
        return 0;
#ifdef _WIN32
    PyErr_SetString(PyExc_OSError, "the compiled launcher loads libcuda only on Linux");
    return -1;
#else
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "cannot load libcuda.so.1: %s", why ? why : "unknown");
        return -1;
    }
    void *sym = dlsym(lib, "cuLaunchKernel");
    if (!sym) {
        PyErr_SetString(PyExc_OSError, "libcuda.so.1 has no cuLaunchKernel");
        return -1;
    }
    driver_capture = (capture_fn)dlsym(lib, "cuStreamIsCapturing"); /* NULL: stream-K Launchers are refused */
    driver_launch = (launch_fn)sym;
    return 0;
#endif
}

/* Make the launch's device context current (ensure_context), run again(self, arg) once, make the previous one current
 * again: where a driver call found no (or another device's) current context on this thread. The result code, or -1
 * with a Python error set. */
static int with_context(Launcher *self, int (*again)(Launcher *, const void *), const void *arg) {
    PyObject *restore = PyObject_CallNoArgs(self->ensure_context);
    if (!restore)
        return -1;
    int rc = again(self, arg);
    if (restore != Py_None) {
        PyObject *r = PyObject_CallNoArgs(restore);
        Py_DECREF(restore);
        if (!r)
            return -1;
        Py_DECREF(r);
    } else {
        Py_DECREF(restore);
    }
    return rc;
}

static inline int retry_with_context(int rc) {
    return rc == 201 || rc == 400 || rc == 709; /* INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED */
}

typedef struct {
    void *func;
    const unsigned *grid, *block;
    unsigned smem;
    void **params;
    uint64_t stream;
} LaunchArgs;

static int launch_once(Launcher *self, const void *arg) {
    const LaunchArgs *l = (const LaunchArgs *)arg;
    return self->launch(l->func, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->smem,
                        (void *)(uintptr_t)l->stream, l->params, NULL);
}

/* one cuLaunchKernel, retried once with the context set; 0, or -1 with the CudaError raised (self->fail) */
static int launch_checked(Launcher *self, const LaunchArgs *l) {
    int rc = launch_once(self, l);
    if (retry_with_context(rc))
        rc = with_context(self, launch_once, l);
    if (rc == -1 && PyErr_Occurred())
        return -1;
    if (rc) {
        PyObject *code = PyLong_FromLong(rc);
        PyObject *r = code ? PyObject_CallFunctionObjArgs(self->fail, code, NULL) : NULL;
        Py_XDECREF(code);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed (%d)", rc);
        return -1;
    }
    return 0;
}

/* The launch. */
int do_launch(Launcher *self, uint64_t stream) {
    LaunchArgs first = {self->func, self->grid, self->block, self->smem, self->params, stream};
    if (launch_checked(self, &first) < 0)
        return -1;
    self->launches++;
    return 0;
}

static int capture_once(Launcher *self, const void *arg) {
    int status = 0;
    int rc = self->capture((void *)(uintptr_t) * (const uint64_t *)arg, &status);
    return rc ? rc : (status ? -2 : 0); /* -2: capturing (or a capture invalidated) */
}

/* The calling stream's remembered workspace into *address: 1, or 0 (none remembered for this stream; WS_STREAMK: the
 * stream is capturing, or its status could not be read): the caller declines and the Python side gets it), or -1 (a
 * Python error: ensure_context raised). */
int stream_workspace(Launcher *self, uint64_t stream, uint64_t *address) {
    int i = 0;
    while (i < self->ws_n && self->ws_stream[i] != stream)
        i++;
    if (i == self->ws_n)
        return 0;
    if (self->ws_kind == WS_STREAMK) {
        int rc = capture_once(self, &stream);
        if (retry_with_context(rc))
            rc = with_context(self, capture_once, &stream);
        if (rc == -1 && PyErr_Occurred())
            return -1;
        if (rc)
            return 0; /* capturing, or an error the Python side reports (launchplan.streamk_workspace) */
    }
    *address = self->ws_addr[i];
    return 1;
}
