/* ptxgen.runtime._launcher: the Launcher type. Its constructor reads what a prepared launch is (the function,
 * grid, block, shared bytes, the parameter block and where each operand's pointer goes in it; a workspace operand,
 * where split-K or stream-K has one); its methods are run/run_all/patch (pointers given),
 * run_cached (the workspace the stream's remembered one), remember_workspace and call (tensors given), which go
 * through _launcher_patch.c; its attributes are the stream reader, the launch count, the pointers the block holds and
 * the remembered workspaces. See _launcher.h for the files of the module. */
#include "_launcher.h"

PyObject *Launcher_type = NULL;

static void Launcher_dealloc(Launcher *self) {
    for (int i = 0; i < MAX_OPERANDS; i++)
        for (int j = 0; j < self->nslots[i]; j++)
            Py_XDECREF(self->slots[i][j].source);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->ensure_context);
    Py_XDECREF(self->fail);
    Py_XDECREF(self->stream_reader);
    Py_XDECREF(self->device_index);
    free_instance((PyObject *)self);
}

/* Launcher(func, grid, block, smem, params_address, owner, operands, launch_address, ensure_context, fail,
 *          device_index, spans, masks[, workspace])
 * operands: three to MAX_OPERANDS sequences (A, B, D, then the pointers run_all patches besides them) of
 * (address, source-or-None); launch_address: 0 for libcuda's
 * cuLaunchKernel, else the address of a function with its signature (tests); masks: (A and B, D) alignment
 * masks of the pointers (a pointer with one of those bits set is declined). workspace: None, or (kind,
 * capture_address): the last operand is the calling stream's workspace (WS_STREAMK: split-K's and stream-K's),
 * capture_address 0 for libcuda's cuStreamIsCapturing, else a function with its signature (tests). */
static int read_workspace(Launcher *self, PyObject *workspace) {
    int kind;
    unsigned long long capture;
    if (workspace == Py_None)
        return 0;
    if (!PyArg_ParseTuple(workspace, "iK", &kind, &capture))
        return -1;
    if (kind != WS_STREAMK || self->nops < 4) {
        PyErr_SetString(PyExc_ValueError, "workspace: (WS_STREAMK, capture_address), its operand after A, B, D");
        return -1;
    }
    self->ws_kind = kind;
    if (kind == WS_STREAMK) {
        if (capture) {
            self->capture = (capture_fn)(uintptr_t)capture;
        } else {
            if (find_driver() < 0)
                return -1;
            if (!driver_capture) {
                PyErr_SetString(PyExc_OSError, "libcuda.so.1 has no cuStreamIsCapturing");
                return -1;
            }
            self->capture = driver_capture;
        }
    }
    return 0;
}

static PyObject *Launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long func, params, launch_address;
    unsigned gx, gy, gz, bx, by, bz, smem;
    unsigned long long sa, sb, so, mask_in, mask_out;
    PyObject *owner, *operands, *ensure_context, *fail, *device_index, *workspace = Py_None;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "K(III)(III)IKOOKOOO(KKK)(KK)|O", &func, &gx, &gy, &gz, &bx, &by, &bz, &smem, &params,
                          &owner, &operands, &launch_address, &ensure_context, &fail, &device_index, &sa, &sb, &so,
                          &mask_in, &mask_out, &workspace))
        return NULL;
    launch_fn fn;
    if (launch_address) {
        fn = (launch_fn)(uintptr_t)launch_address;
    } else {
        if (find_driver() < 0)
            return NULL;
        fn = driver_launch;
    }
    PyObject *ops = PySequence_Tuple(operands);
    if (!ops)
        return NULL;
    Py_ssize_t nops = PyTuple_Size(ops);
    if (nops < 3 || nops > MAX_OPERANDS) {
        Py_DECREF(ops);
        PyErr_Format(PyExc_ValueError, "operands: 3 to %d sequences of slots (A, B, D, ...), not %zd", MAX_OPERANDS, nops);
        return NULL;
    }
    allocfunc tp_alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Launcher *self = (Launcher *)tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(ops);
        return NULL;
    }
    self->func = (void *)(uintptr_t)func;
    self->grid[0] = gx, self->grid[1] = gy, self->grid[2] = gz;
    self->block[0] = bx, self->block[1] = by, self->block[2] = bz;
    self->smem = smem;
    self->params = (void **)(uintptr_t)params;
    self->launch = fn;
    self->span[0] = sa, self->span[1] = sb, self->span[2] = so;
    self->mask_in = mask_in, self->mask_out = mask_out;
    Py_INCREF(owner), self->owner = owner;
    Py_INCREF(ensure_context), self->ensure_context = ensure_context;
    Py_INCREF(fail), self->fail = fail;
    Py_INCREF(device_index), self->device_index = device_index;
    Py_INCREF(Py_None), self->stream_reader = Py_None;
    self->nops = (int)nops;
    for (int i = 0; i < self->nops; i++) {
        PyObject *slots = PySequence_Tuple(PyTuple_GetItem(ops, i));
        if (!slots)
            goto fail;
        Py_ssize_t n = PyTuple_Size(slots);
        if (n < 1 || n > MAX_SLOTS) {
            Py_DECREF(slots);
            PyErr_Format(PyExc_ValueError, "operand %d: 1 to %d slots, not %zd", i, MAX_SLOTS, n);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *pair = PyTuple_GetItem(slots, j);
            PyObject *addr = pair ? PySequence_GetItem(pair, 0) : NULL;
            PyObject *src = addr ? PySequence_GetItem(pair, 1) : NULL;
            int bad = !src || read_u64(addr, &self->slots[i][j].address) < 0;
            Py_XDECREF(addr);
            if (bad) {
                Py_XDECREF(src);
                Py_DECREF(slots);
                goto fail;
            }
            if (src == Py_None) {
                Py_DECREF(src);
                src = NULL;
            }
            self->slots[i][j].source = src;
            self->nslots[i] = (int)j + 1;
        }
        Py_DECREF(slots);
    }
    if (read_workspace(self, workspace) < 0)
        goto fail;
    Py_DECREF(ops);
    return (PyObject *)self;
fail:
    Py_DECREF(ops);
    Py_DECREF(self);
    return NULL;
}
static int args_u64(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, uint64_t *v, const char *what) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, not %zd", what, want, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (read_u64(args[i], &v[i]) < 0)
            return -1;
    return 0;
}

/* run(pa, pb, pd, stream): write the pointers and launch (the caller checked them). */
static PyObject *Launcher_run(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[4];
    if (self->ws_kind || self->nops > 3) { /* the other operands would keep whatever they held */
        PyErr_SetString(PyExc_TypeError, "run: this launch has more operands than A, B, D: run_all or run_cached");
        return NULL;
    }
    if (args_u64(args, nargs, 4, v, "run") < 0 || patch(self, v, 3) < 0 || do_launch(self, v[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* run_all(p0, ..., p[nops - 1], stream): every operand's pointer (A, B, D and the rest, in the constructor's order),
 * then the launch (the caller checked them). */
static PyObject *Launcher_run_all(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[MAX_OPERANDS + 1];
    if (args_u64(args, nargs, self->nops + 1, v, "run_all") < 0 || patch(self, v, self->nops) < 0 ||
        do_launch(self, v[self->nops]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* run_cached(p0, ..., stream): run_all without the workspace operand, which is the calling stream's remembered one
 * (a Launcher without a workspace operand: run_all). True: launched; False: declined (no workspace remembered for
 * this stream; stream-K: the stream is capturing), nothing written: the caller gets the workspace and calls run_all. */
static PyObject *Launcher_run_cached(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[MAX_OPERANDS + 1];
    int given = self->ws_kind ? self->nops - 1 : self->nops;
    if (args_u64(args, nargs, given + 1, v, "run_cached") < 0)
        return NULL;
    uint64_t stream = v[given];
    if (self->ws_kind) {
        int r = stream_workspace(self, stream, &v[given]);
        if (r <= 0) {
            if (r < 0)
                return NULL;
            Py_RETURN_FALSE;
        }
    }
    if (patch(self, v, self->nops) < 0 || do_launch(self, stream) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* remember_workspace(stream, address): the calling stream's workspace for the calls after (the last WS_STREAMS
 * streams; a stream already remembered gets the new address). */
static PyObject *Launcher_remember_workspace(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[2];
    if (args_u64(args, nargs, 2, v, "remember_workspace") < 0)
        return NULL;
    if (!self->ws_kind) {
        PyErr_SetString(PyExc_ValueError, "remember_workspace: this launch has no workspace operand");
        return NULL;
    }
    int i = 0;
    while (i < self->ws_n && self->ws_stream[i] != v[0])
        i++;
    if (i == self->ws_n) {
        if (self->ws_n < WS_STREAMS) {
            self->ws_n++;
        } else {
            i = self->ws_next;
            self->ws_next = (self->ws_next + 1) % WS_STREAMS;
        }
    }
    self->ws_stream[i] = v[0], self->ws_addr[i] = v[1];
    Py_RETURN_NONE;
}

/* patch(pa, pb, pd): write the pointers without launching (tests compare the block's bytes). */
static PyObject *Launcher_patch(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[3];
    if (args_u64(args, nargs, 3, v, "patch") < 0 || patch(self, v, 3) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* call(a, b, out): call_tensors for objects with data_ptr() (out given). */
static PyObject *Launcher_call(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "call(a, b, out)");
        return NULL;
    }
    return call_tensors(self, args[0], args[1], args[2], 1);
}

static PyObject *Launcher_get_stream_reader(Launcher *self, void *closure) {
    Py_INCREF(self->stream_reader);
    return self->stream_reader;
}

static int Launcher_set_stream_reader(Launcher *self, PyObject *value, void *closure) {
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "stream_reader cannot be deleted");
        return -1;
    }
    PyObject *old = self->stream_reader;
    Py_INCREF(value);
    self->stream_reader = value;
    Py_XDECREF(old);
    return 0;
}

static PyObject *Launcher_get_launches(Launcher *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->launches);
}

static PyObject *Launcher_get_pointers(Launcher *self, void *closure) {
    PyObject *t = PyTuple_New(self->nops);
    if (!t)
        return NULL;
    for (int i = 0; i < self->nops; i++) {
        PyObject *v = self->valid[i] ? PyLong_FromUnsignedLongLong(self->cur[i]) : (Py_INCREF(Py_None), Py_None);
        if (!v || PyTuple_SetItem(t, i, v) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

static PyMethodDef Launcher_methods[] = {
    {"run", (PyCFunction)(void (*)(void))Launcher_run, METH_FASTCALL, "run(pa, pb, pd, stream): write the pointers, launch"},
    {"run_all", (PyCFunction)(void (*)(void))Launcher_run_all, METH_FASTCALL,
     "run_all(p0, ..., p[nops - 1], stream): write every operand's pointer, launch"},
    {"run_cached", (PyCFunction)(void (*)(void))Launcher_run_cached, METH_FASTCALL,
     "run_cached(p0, ..., stream): run_all with the stream's remembered workspace as the last pointer; False: declined"},
    {"remember_workspace", (PyCFunction)(void (*)(void))Launcher_remember_workspace, METH_FASTCALL,
     "remember_workspace(stream, address): the stream's workspace for the calls that are not given it"},
    {"patch", (PyCFunction)(void (*)(void))Launcher_patch, METH_FASTCALL, "patch(pa, pb, pd): write the pointers only"},
    {"call", (PyCFunction)(void (*)(void))Launcher_call, METH_FASTCALL,
     "call(a, b, out): data_ptr() of each, checks, launch on the current stream; out, or None (not for this path)"},
    {NULL, NULL, 0, NULL}};

static PyObject *Launcher_get_workspaces(Launcher *self, void *closure) {
    PyObject *t = PyTuple_New(self->ws_n);
    for (int i = 0; t && i < self->ws_n; i++) {
        PyObject *pair =
            Py_BuildValue("(KK)", (unsigned long long)self->ws_stream[i], (unsigned long long)self->ws_addr[i]);
        if (!pair || PyTuple_SetItem(t, i, pair) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

static PyObject *Launcher_get_workspace_kind(Launcher *self, void *closure) {
    return PyLong_FromLong(self->ws_kind);
}

static PyGetSetDef Launcher_getset[] = {
    {"stream_reader", (getter)Launcher_get_stream_reader, (setter)Launcher_set_stream_reader,
     "callable(device_index) -> the current CUstream handle (None: call() declines)", NULL},
    {"launches", (getter)Launcher_get_launches, NULL, "launches made (split-K's two kernels count as one)", NULL},
    {"workspaces", (getter)Launcher_get_workspaces, NULL, "the remembered (stream, workspace address) pairs", NULL},
    {"workspace_kind", (getter)Launcher_get_workspace_kind, NULL, "WS_NONE or WS_STREAMK", NULL},
    {"pointers", (getter)Launcher_get_pointers, NULL, "the pointers the block holds now (A, B, D, then any others), None where none was written", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Launcher_slots[] = {
    {Py_tp_new, Launcher_new},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_methods, Launcher_methods},
    {Py_tp_getset, Launcher_getset},
    {Py_tp_doc, "A prepared launch: patch the operands' pointers into the parameter block, cuLaunchKernel once."},
    {0, NULL}};

PyType_Spec Launcher_spec = {"ptxgen.runtime._launcher.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT,
                                    Launcher_slots};
