/* ptxgen.runtime._launcher: libcuda. cuLaunchKernel is dlopen'ed from libcuda.so.1 at first use (no CUDA header:
 * its prototype is launch_fn in _launcher.h), and a launch retries once where the thread had no (or another)
 * current context (switching back afterwards). See _launcher.h for the files of the module. */
#include "_launcher.h"
#ifndef _WIN32
#include <dlfcn.h>
#endif

launch_fn driver_launch = NULL;

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
    driver_launch = (launch_fn)sym;
    return 0;
#endif
}

int do_launch(Launcher *self, uint64_t stream) {
    int rc = self->launch(self->func, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                          self->block[2], self->smem, (void *)(uintptr_t)stream, self->params, NULL);
    if (rc == 201 || rc == 400 || rc == 709) {
        /* no (or another device's) current context on this thread: set the launch's device's, once; ensure_context
         * returns None or a callable that makes the previous context current again, called after the retry */
        PyObject *restore = PyObject_CallNoArgs(self->ensure_context);
        if (!restore)
            return -1;
        rc = self->launch(self->func, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                          self->block[2], self->smem, (void *)(uintptr_t)stream, self->params, NULL);
        if (restore != Py_None) {
            PyObject *r = PyObject_CallNoArgs(restore);
            Py_DECREF(restore);
            if (!r)
                return -1;
            Py_DECREF(r);
        } else {
            Py_DECREF(restore);
        }
    }
    if (rc) {
        PyObject *code = PyLong_FromLong(rc);
        PyObject *r = code ? PyObject_CallFunctionObjArgs(self->fail, code, NULL) : NULL;
        Py_XDECREF(code);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed (%d)", rc);
        return -1;
    }
    self->launches++;
    return 0;
}
