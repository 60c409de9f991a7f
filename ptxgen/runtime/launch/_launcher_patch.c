/* ptxgen.runtime._launcher: a launch for three pointers. The checks that rule this path out (alignment, an out
 * given by the caller that overlaps an input), the current stream, the writes into the parameter block (a raw
 * pointer, or the tensor map a Python callable gives for it) and the launch (_launcher_driver.c). See _launcher.h
 * for the files of the module.
 *
 * do not edit the layout rules here without runtime/params.py: the tests compare the bytes both write. */
#include "_launcher.h"

/* Gather the maps of the operands whose pointer changed, then write: the writes run no Python code, and if
 * another thread moved a pointer while a map was being fetched, gather again. */
int patch(Launcher *self, const uint64_t *want, int n) {
    PyObject *maps[MAX_OPERANDS][MAX_SLOTS];
    memset(maps, 0, sizeof maps);
    uint64_t gathered_for[MAX_OPERANDS] = {0};
    int gathered[MAX_OPERANDS] = {0};
    for (int attempt = 0; attempt < 8; attempt++) {
        int again = 0;
        for (int i = 0; i < n; i++) {
            if ((self->valid[i] && self->cur[i] == want[i]) || (gathered[i] && gathered_for[i] == want[i]))
                continue;
            for (int j = 0; j < self->nslots[i]; j++) {
                Slot *s = &self->slots[i][j];
                if (!s->source)
                    continue;
                PyObject *ptr = PyLong_FromUnsignedLongLong(want[i]);
                PyObject *data = ptr ? PyObject_CallFunctionObjArgs(s->source, ptr, NULL) : NULL;
                Py_XDECREF(ptr);
                if (!data)
                    goto error;
                char *buf;
                Py_ssize_t len;
                if (PyBytes_AsStringAndSize(data, &buf, &len) < 0 || len != MAP_BYTES) {
                    if (!PyErr_Occurred())
                        PyErr_Format(PyExc_ValueError, "a tensor map is %d bytes, not %zd", MAP_BYTES, len);
                    Py_DECREF(data);
                    goto error;
                }
                Py_XDECREF(maps[i][j]);
                maps[i][j] = data;
            }
            gathered[i] = 1, gathered_for[i] = want[i];
        }
        /* from here to the launch: no Python code */
        for (int i = 0; i < n; i++) {
            if (self->valid[i] && self->cur[i] == want[i])
                continue;
            if (!(gathered[i] && gathered_for[i] == want[i])) {
                again = 1;
                break;
            }
        }
        if (again)
            continue;
        for (int i = 0; i < n; i++) {
            if (self->valid[i] && self->cur[i] == want[i])
                continue;
            for (int j = 0; j < self->nslots[i]; j++) {
                Slot *s = &self->slots[i][j];
                if (s->source)
                    memcpy((void *)(uintptr_t)s->address, PyBytes_AsString(maps[i][j]), MAP_BYTES);
                else
                    memcpy((void *)(uintptr_t)s->address, &want[i], 8);
            }
            self->cur[i] = want[i], self->valid[i] = 1;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < MAX_SLOTS; j++)
                Py_XDECREF(maps[i][j]);
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "ptxgen launcher: the pointers kept changing under another thread");
error:
    for (int i = 0; i < n; i++)
        for (int j = 0; j < MAX_SLOTS; j++)
            Py_XDECREF(maps[i][j]);
    return -1;
}

static int data_ptr(PyObject *x, uint64_t *out) {
    PyObject *p = PyObject_CallMethodObjArgs(x, s_data_ptr, NULL);
    if (!p)
        return -1;
    int r = read_u64(p, out);
    Py_DECREF(p);
    return r;
}

static int overlaps(uint64_t x, uint64_t xspan, uint64_t y, uint64_t yspan) {
    return xspan && yspan && x < y + yspan && y < x + xspan;
}

/* The launch for pointers p (A, B, D) of a torch call: checks (aligned; an out given by the caller apart from the
 * inputs), the current stream, patch, launch -> out, or None when a pointer rules this path out (the caller's slow
 * path says why). A Launcher with a workspace operand (A, B, D, W) takes the stream's remembered one, or declines
 * (none remembered for the stream, or a stream-K launch on a capturing stream: the Python path gets it). */
PyObject *call_pointers(Launcher *self, const uint64_t p[3], PyObject *out, int out_given) {
    if (((p[0] | p[1]) & self->mask_in) || (p[2] & self->mask_out))
        Py_RETURN_NONE;
    if (out_given && (overlaps(p[2], self->span[2], p[0], self->span[0]) || overlaps(p[2], self->span[2], p[1], self->span[1])))
        Py_RETURN_NONE;
    if (self->stream_reader == Py_None)
        Py_RETURN_NONE;
    PyObject *h = PyObject_CallFunctionObjArgs(self->stream_reader, self->device_index, NULL);
    if (!h)
        return NULL;
    uint64_t stream, want[4] = {p[0], p[1], p[2], 0};
    int bad = read_u64(h, &stream) < 0;
    Py_DECREF(h);
    if (bad)
        return NULL;
    int n = 3;
    if (self->ws_kind || self->nops > 3) {
        if (self->nops != 4 || !self->ws_kind) /* other operands than a workspace: not this path's to fill */
            Py_RETURN_NONE;
        int r = stream_workspace(self, stream, &want[3]);
        if (r <= 0) {
            if (r < 0)
                return NULL;
            Py_RETURN_NONE;
        }
        n = 4;
    }
    if (patch(self, want, n) < 0 || do_launch(self, stream) < 0)
        return NULL;
    Py_INCREF(out);
    return out;
}

/* The torch call: a, b, out (out given: checked for overlap), their pointers read with data_ptr(). */
PyObject *call_tensors(Launcher *self, PyObject *a, PyObject *b, PyObject *out, int out_given) {
    uint64_t p[3];
    if (data_ptr(a, &p[0]) < 0 || data_ptr(b, &p[1]) < 0 || data_ptr(out, &p[2]) < 0)
        return NULL;
    return call_pointers(self, p, out, out_given);
}

