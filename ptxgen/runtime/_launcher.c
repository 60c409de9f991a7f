/* ptxgen.runtime._launcher: the hot path of a prepared launch in one C call.
 *
 * A Launcher holds what ptxgen.api.launchplan.Launch prepared once per dispatch key: the CUfunction, grid,
 * block, dynamic shared bytes and the address of the pre-packed parameter block (the void** array that
 * cuLaunchKernel reads, owned by a runtime.params.ParamBlock this object keeps alive), plus, for each of the
 * three operands A, B, D, where its pointer goes in that block: a raw 8-byte pointer parameter, or a 128-byte
 * tensor map whose bytes a Python callable gives for a pointer (runtime.params.MapSlot.bytes_for: its small
 * cache or the encoder). A call reads the operands' data pointers, checks them (aligned as the kernel needs; an out
 * given by the caller must not overlap an input), writes the pointers that changed into the block and calls
 * cuLaunchKernel once. The driver is dlopen'ed ("libcuda.so.1") at first use; no CUDA header is needed: the
 * one prototype is declared below. Plain CPython stable ABI (3.11), so one build serves later Pythons.
 *
 * The GIL is held from the pointer writes to the launch, and no Python code runs in between: two threads
 * sharing a Launcher cannot interleave a patch and a launch. Python code (a map's bytes) runs only in the
 * gathering step before; the writes re-check the state afterwards.
 *
 * do not edit the layout rules here without runtime/params.py: the tests compare the bytes both write.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#ifndef _WIN32
#include <dlfcn.h>
#endif

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned smem, void *stream, void **params, void **extra);

#define MAP_BYTES 128
#define MAX_SLOTS 4

static launch_fn driver_launch = NULL; /* cuLaunchKernel from libcuda.so.1, found at first use */
static PyObject *tensor_type = NULL;   /* torch.Tensor once the Python side has seen torch */
static PyObject *s_shape, *s_stride, *s_dtype, *s_get_device, *s_data_ptr, *s_c, *s_allocate;

/* The optional metadata reader (runtime/_torchmeta.cpp, built against the installed torch by runtime/torchmeta.py
 * and handed over with set_meta_reader): a tensor's sizes, strides, scalar type, device and data pointer read from
 * its at::Tensor in a few ns, where the Python getters (x.shape, x.stride(), ...) cost about 0.3 us each. It serves
 * only objects whose type is exactly one of plain_types (torch.Tensor, torch.nn.Parameter); returns 0 with *m
 * filled (unused dimensions zero), or nonzero: not a plain strided tensor it can describe (the getters then run).
 * Keep TensorMeta as _torchmeta.cpp's PtxgenTensorMeta (META_ABI checks the size). */
#define META_DIMS 3
#define META_ABI ((int)sizeof(TensorMeta))
typedef struct {
    int64_t ndim;
    int64_t sizes[META_DIMS];
    int64_t strides[META_DIMS];
    int32_t scalar_type, device_type, device_index, flags;
    uint64_t data_ptr; /* last: the bytes before it are what a dispatch key is made of */
} TensorMeta;
#define META_KEY_BYTES offsetof(TensorMeta, data_ptr)
typedef int (*meta_fn)(PyObject *, TensorMeta *);
static meta_fn meta_reader = NULL;
#define MAX_PLAIN 4
static PyObject *plain_types[MAX_PLAIN];
static int n_plain = 0;

static int is_plain(PyObject *x) {
    PyObject *t = (PyObject *)Py_TYPE(x);
    for (int i = 0; i < n_plain; i++)
        if (t == plain_types[i])
            return 1;
    return 0;
}

/* the metadata of a, b (and out when n == 3), or 0 when the reader cannot describe one of them */
static int read_metas(PyObject *const *x, int n, TensorMeta *m) {
    if (!meta_reader)
        return 0;
    for (int i = 0; i < n; i++)
        if (!is_plain(x[i]) || meta_reader(x[i], &m[i]) != 0)
            return 0;
    return 1;
}

typedef struct {
    uint64_t address; /* where in the block: 8 bytes of pointer, or MAP_BYTES of tensor map */
    PyObject *source; /* NULL: a raw pointer; else callable(ptr) -> bytes (the map for that pointer) */
} Slot;

typedef struct {
    PyObject_HEAD
    void *func;
    unsigned grid[3], block[3], smem;
    void **params;
    PyObject *owner;         /* the ParamBlock (keeps the buffer alive) */
    PyObject *ensure_context;
    PyObject *fail;          /* callable(rc): raises the CudaError */
    PyObject *stream_reader; /* callable(device_index) -> CUstream handle; None until torch is known */
    PyObject *device_index;
    launch_fn launch;
    uint64_t span[3];        /* bytes each operand spans (0: unknown) */
    uint64_t mask_in, mask_out; /* pointer alignment: A and B (TMA 16 B or the cp.async copy size), D */
    int nslots[3];
    Slot slots[3][MAX_SLOTS];
    uint64_t cur[3];
    int valid[3];
    unsigned long long launches;
} Launcher;

static int find_driver(void) {
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

static void Launcher_dealloc(Launcher *self) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < self->nslots[i]; j++)
            Py_XDECREF(self->slots[i][j].source);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->ensure_context);
    Py_XDECREF(self->fail);
    Py_XDECREF(self->stream_reader);
    Py_XDECREF(self->device_index);
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    freefunc free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free(self);
    Py_DECREF(tp);
}

static int read_u64(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Launcher(func, grid, block, smem, params_address, owner, operands, launch_address, ensure_context, fail,
 *          device_index, spans, masks)
 * operands: three sequences (A, B, D) of (address, source-or-None); launch_address: 0 for libcuda's
 * cuLaunchKernel, else the address of a function with its signature (tests); masks: (A and B, D) alignment
 * masks of the pointers (a pointer with one of those bits set is declined). */
static PyObject *Launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long func, params, launch_address;
    unsigned gx, gy, gz, bx, by, bz, smem;
    unsigned long long sa, sb, so, mask_in, mask_out;
    PyObject *owner, *operands, *ensure_context, *fail, *device_index;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "K(III)(III)IKOOKOOO(KKK)(KK)", &func, &gx, &gy, &gz, &bx, &by, &bz, &smem, &params, &owner,
                          &operands, &launch_address, &ensure_context, &fail, &device_index, &sa, &sb, &so, &mask_in,
                          &mask_out))
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
    if (PyTuple_Size(ops) != 3) {
        Py_DECREF(ops);
        PyErr_SetString(PyExc_ValueError, "operands: three sequences of slots (A, B, D)");
        return NULL;
    }
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    allocfunc tp_alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Launcher *self = (Launcher *)tp_alloc(type, 0);
    (void)tp_free;
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
    for (int i = 0; i < 3; i++) {
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
    Py_DECREF(ops);
    return (PyObject *)self;
fail:
    Py_DECREF(ops);
    Py_DECREF(self);
    return NULL;
}

/* Gather the maps of the operands whose pointer changed, then write: the writes run no Python code, and if
 * another thread moved a pointer while a map was being fetched, gather again. */
static int patch(Launcher *self, const uint64_t want[3]) {
    PyObject *maps[3][MAX_SLOTS];
    memset(maps, 0, sizeof maps);
    uint64_t gathered_for[3] = {0, 0, 0};
    int gathered[3] = {0, 0, 0};
    for (int attempt = 0; attempt < 8; attempt++) {
        int again = 0;
        for (int i = 0; i < 3; i++) {
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
        for (int i = 0; i < 3; i++) {
            if (self->valid[i] && self->cur[i] == want[i])
                continue;
            if (!(gathered[i] && gathered_for[i] == want[i])) {
                again = 1;
                break;
            }
        }
        if (again)
            continue;
        for (int i = 0; i < 3; i++) {
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
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < MAX_SLOTS; j++)
                Py_XDECREF(maps[i][j]);
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "ptxgen launcher: the pointers kept changing under another thread");
error:
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < MAX_SLOTS; j++)
            Py_XDECREF(maps[i][j]);
    return -1;
}

static int do_launch(Launcher *self, uint64_t stream) {
    int rc = self->launch(self->func, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                          self->block[2], self->smem, (void *)(uintptr_t)stream, self->params, NULL);
    if (rc == 201 || rc == 400 || rc == 709) { /* no (or another) current context on this thread: set it, once */
        PyObject *r = PyObject_CallNoArgs(self->ensure_context);
        if (!r)
            return -1;
        Py_DECREF(r);
        rc = self->launch(self->func, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                          self->block[2], self->smem, (void *)(uintptr_t)stream, self->params, NULL);
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
    if (args_u64(args, nargs, 4, v, "run") < 0 || patch(self, v) < 0 || do_launch(self, v[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* patch(pa, pb, pd): write the pointers without launching (tests compare the block's bytes). */
static PyObject *Launcher_patch(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t v[3];
    if (args_u64(args, nargs, 3, v, "patch") < 0 || patch(self, v) < 0)
        return NULL;
    Py_RETURN_NONE;
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
 * path says why). */
static PyObject *call_pointers(Launcher *self, const uint64_t p[3], PyObject *out, int out_given) {
    if (((p[0] | p[1]) & self->mask_in) || (p[2] & self->mask_out))
        Py_RETURN_NONE;
    if (out_given && (overlaps(p[2], self->span[2], p[0], self->span[0]) || overlaps(p[2], self->span[2], p[1], self->span[1])))
        Py_RETURN_NONE;
    if (self->stream_reader == Py_None)
        Py_RETURN_NONE;
    PyObject *h = PyObject_CallFunctionObjArgs(self->stream_reader, self->device_index, NULL);
    if (!h)
        return NULL;
    uint64_t stream;
    int bad = read_u64(h, &stream) < 0;
    Py_DECREF(h);
    if (bad || patch(self, p) < 0 || do_launch(self, stream) < 0)
        return NULL;
    Py_INCREF(out);
    return out;
}

/* The torch call: a, b, out (out given: checked for overlap), their pointers read with data_ptr(). */
static PyObject *call_tensors(Launcher *self, PyObject *a, PyObject *b, PyObject *out, int out_given) {
    uint64_t p[3];
    if (data_ptr(a, &p[0]) < 0 || data_ptr(b, &p[1]) < 0 || data_ptr(out, &p[2]) < 0)
        return NULL;
    return call_pointers(self, p, out, out_given);
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
    PyObject *t = PyTuple_New(3);
    if (!t)
        return NULL;
    for (int i = 0; i < 3; i++) {
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
    {"patch", (PyCFunction)(void (*)(void))Launcher_patch, METH_FASTCALL, "patch(pa, pb, pd): write the pointers only"},
    {"call", (PyCFunction)(void (*)(void))Launcher_call, METH_FASTCALL,
     "call(a, b, out): data_ptr() of each, checks, launch on the current stream; out, or None (not for this path)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Launcher_getset[] = {
    {"stream_reader", (getter)Launcher_get_stream_reader, (setter)Launcher_set_stream_reader,
     "callable(device_index) -> the current CUstream handle (None: call() declines)", NULL},
    {"launches", (getter)Launcher_get_launches, NULL, "launches made", NULL},
    {"pointers", (getter)Launcher_get_pointers, NULL, "the (A, B, D) pointers the block holds now", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Launcher_slots[] = {
    {Py_tp_new, Launcher_new},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_methods, Launcher_methods},
    {Py_tp_getset, Launcher_getset},
    {Py_tp_doc, "A prepared launch: patch the operands' pointers into the parameter block, cuLaunchKernel once."},
    {0, NULL}};

static PyType_Spec Launcher_spec = {"ptxgen.runtime._launcher.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT,
                                    Launcher_slots};
static PyObject *Launcher_type = NULL;

/* ---- the dispatch key of torch tensors, and the whole hot call ------------------------------------------ */
static int is_tensor(PyObject *x) {
    return Py_TYPE(x) == (PyTypeObject *)tensor_type || PyObject_IsInstance(x, tensor_type) == 1;
}

static int read_part(PyObject *x, PyObject **v);

/* (x.shape, x.stride(), x.dtype, x.get_device()) into t[at:at+4] */
static int key_part(PyObject *t, Py_ssize_t at, PyObject *x) {
    PyObject *v[4];
    if (read_part(x, v) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        PyTuple_SetItem(t, at + i, v[i]); /* steals */
    return 0;
}

/* The same tuple as ptxgen.api.launchplan.torch_key(a, b, out). */
static PyObject *torch_key(PyObject *a, PyObject *b, PyObject *out) {
    int with_out = out != Py_None;
    PyObject *t = PyTuple_New(with_out ? 12 : 8);
    if (!t)
        return NULL;
    if (key_part(t, 0, a) < 0 || key_part(t, 4, b) < 0 || (with_out && key_part(t, 8, out) < 0)) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

static PyObject *hot(PyObject *table, PyObject *key, PyObject *a, PyObject *b, PyObject *out) {
    PyObject *entry = PyDict_GetItemWithError(table, key); /* borrowed */
    if (!entry) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    Py_INCREF(entry);
    PyObject *c = PyObject_GetAttr(entry, s_c);
    if (!c || c == Py_None || !PyObject_TypeCheck(c, (PyTypeObject *)Launcher_type)) {
        Py_DECREF(entry);
        if (!c)
            return NULL;
        Py_DECREF(c);
        Py_RETURN_NONE;
    }
    PyObject *r;
    if (out == Py_None) {
        PyObject *fresh = PyObject_CallMethodObjArgs(entry, s_allocate, a, NULL);
        r = fresh ? call_tensors((Launcher *)c, a, b, fresh, 0) : NULL;
        Py_XDECREF(fresh);
    } else {
        r = call_tensors((Launcher *)c, a, b, out, 1);
    }
    Py_DECREF(c);
    Py_DECREF(entry);
    return r;
}

/* hot_kernel(table, a, b, out): CompiledKernel's hot path. table: torch_key -> Launch (with ._c). Returns
 * out (launched), or None (not torch tensors, a key not seen, or a pointer rule: the Python path follows). */
static PyObject *hot_kernel(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hot_kernel(table, a, b, out)");
        return NULL;
    }
    PyObject *a = args[1], *b = args[2], *out = args[3];
    if (!tensor_type || !is_tensor(a) || !is_tensor(b) || (out != Py_None && !is_tensor(out)))
        Py_RETURN_NONE;
    PyObject *key = torch_key(a, b, out);
    if (!key)
        return NULL;
    PyObject *r = hot(args[0], key, a, b, out);
    Py_DECREF(key);
    return r;
}

/* hot_gemm(table, out_dtype, a, b, out): ptxgen.gemm's hot path; table: (out_dtype, torch_key) -> Launch. */
static PyObject *hot_gemm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hot_gemm(table, out_dtype, a, b, out)");
        return NULL;
    }
    PyObject *a = args[2], *b = args[3], *out = args[4];
    if (!tensor_type || !is_tensor(a) || !is_tensor(b) || (out != Py_None && !is_tensor(out)))
        Py_RETURN_NONE;
    PyObject *inner = torch_key(a, b, out);
    if (!inner)
        return NULL;
    PyObject *key = PyTuple_New(2);
    if (!key) {
        Py_DECREF(inner);
        return NULL;
    }
    Py_INCREF(args[1]);
    PyTuple_SetItem(key, 0, args[1]);
    PyTuple_SetItem(key, 1, inner);
    PyObject *r = hot(args[0], key, a, b, out);
    Py_DECREF(key);
    return r;
}

/* ---- the remembered last hit: a hot call without building, hashing or looking up the key --------------------
 *
 * A HotState serves one table (torch_key -> Launch, or (out_dtype, torch_key) -> Launch for ptxgen.gemm) and
 * remembers the last key it found there with its Launch and Launcher. A call reads the same values the key is made
 * of (x.shape, x.stride(), x.dtype, x.get_device() of a, b and out) and compares each with the remembered key's
 * (PyObject_RichCompareBool: identity, else ==, as the table's own lookup compares keys). All equal: the remembered
 * Launch is the one the table holds for this key, and no tuple is built, hashed or looked up. Any difference (another
 * shape, a tensor resized or re-strided in place, another dtype or device, out given or not): the key is built and
 * looked up as before, and a hit there becomes the remembered one. The tensors' metadata is read on every call: an
 * object's identity says nothing about its shape (resize_, as_strided_, set_ keep it).
 *
 * A table that loses entries (LaunchTable.clear/pop/del: ptxgen.api.launchplan) calls forget_tables(): every
 * remembered hit made before it is dropped (a global generation count), so no call reaches a Launch its table let go. */
static unsigned long long table_generation = 1;

typedef struct {
    PyObject *table;   /* the dict (NULL: no table yet: every call declines) */
    PyObject *last;    /* NULL or (out_dtype, key, entry, launcher) */
    unsigned long long generation;
    unsigned long long fast, looked_up; /* calls served by the remembered hit, by the table lookup */
    unsigned long long by_meta;          /* of the fast ones: those the metadata reader served */
    int meta_n;                          /* 0: no metadata kept with last; else its 2 or 3 tensors' */
    TensorMeta meta[3];                  /* last's tensors as the reader saw them, at the call that matched */
} HotState;

static void hot_forget(HotState *h) {
    Py_CLEAR(h->last);
    h->meta_n = 0;
}

static void hot_clear(HotState *h) {
    Py_CLEAR(h->table);
    hot_forget(h);
}

/* 1: the metadata m of the call's n tensors is the remembered hit's (key bytes: all but the pointer), and the
 * hit is for out_dtype (identity; anything else takes the comparing path) */
static int same_meta(HotState *h, PyObject *out_dtype, const TensorMeta *m, int n) {
    if (h->meta_n != n || !h->last || h->generation != table_generation || PyTuple_GetItem(h->last, 0) != out_dtype)
        return 0;
    for (int i = 0; i < n; i++)
        if (memcmp(&m[i], &h->meta[i], META_KEY_BYTES) != 0)
            return 0;
    return 1;
}

/* keep the call's metadata with the remembered hit (or none, where the reader could not read it) */
static void keep_meta(HotState *h, PyObject *const *x, int n) {
    TensorMeta m[3];
    if (read_metas(x, n, m)) {
        memcpy(h->meta, m, sizeof(TensorMeta) * (size_t)n);
        h->meta_n = n;
    } else {
        h->meta_n = 0;
    }
}

/* x.shape, x.stride(), x.dtype, x.get_device() into v[0..4) (new references) */
static int read_part(PyObject *x, PyObject **v) {
    v[0] = PyObject_GetAttr(x, s_shape);
    v[1] = v[0] ? PyObject_CallMethodObjArgs(x, s_stride, NULL) : NULL;
    v[2] = v[1] ? PyObject_GetAttr(x, s_dtype) : NULL;
    v[3] = v[2] ? PyObject_CallMethodObjArgs(x, s_get_device, NULL) : NULL;
    if (!v[3]) {
        for (int i = 0; i < 3; i++)
            Py_CLEAR(v[i]);
        return -1;
    }
    return 0;
}

/* 1: the remembered key is (out_dtype, v[0..n)); 0: not; -1: an error */
static int same_as_last(PyObject *last, PyObject *out_dtype, PyObject *const *v, Py_ssize_t n) {
    PyObject *key = PyTuple_GetItem(last, 1);
    if (!key || PyTuple_Size(key) != n)
        return key ? 0 : -1;
    int r = PyObject_RichCompareBool(out_dtype, PyTuple_GetItem(last, 0), Py_EQ);
    for (Py_ssize_t i = 0; r == 1 && i < n; i++)
        r = PyObject_RichCompareBool(v[i], PyTuple_GetItem(key, i), Py_EQ);
    return r;
}

/* Launch through entry's Launcher c: out given (checked for overlap), or allocated by entry._allocate_torch(a). */
static PyObject *launch_entry(PyObject *entry, Launcher *c, PyObject *a, PyObject *b, PyObject *out) {
    if (out != Py_None)
        return call_tensors(c, a, b, out, 1);
    PyObject *fresh = PyObject_CallMethodObjArgs(entry, s_allocate, a, NULL);
    PyObject *r = fresh ? call_tensors(c, a, b, fresh, 0) : NULL;
    Py_XDECREF(fresh);
    return r;
}

/* The hot call of table h for torch tensors a, b (out: a tensor or None); out_dtype: None for a kernel's table
 * (key: torch_key), ptxgen.gemm's requested output type for its table (key: (out_dtype, torch_key)).
 * Returns out (launched), None (declined: the Python path follows and says why), or NULL (an error). */
static PyObject *hot_call(HotState *h, int gemm, PyObject *out_dtype, PyObject *a, PyObject *b, PyObject *out) {
    if (!h->table || !tensor_type || !is_tensor(a) || !is_tensor(b) || (out != Py_None && !is_tensor(out)))
        Py_RETURN_NONE;
    int nt = out != Py_None ? 3 : 2;
    PyObject *xs[3] = {a, b, out};
    if (meta_reader && h->meta_n == nt) { /* the metadata reader: the remembered hit's key compared as bytes */
        TensorMeta m[3];
        if (read_metas(xs, nt, m) && same_meta(h, out_dtype, m, nt)) {
            PyObject *last = h->last; /* nothing above ran Python code: last is the record same_meta checked */
            PyObject *entry = PyTuple_GetItem(last, 2), *c = PyTuple_GetItem(last, 3);
            Py_INCREF(entry), Py_INCREF(c);
            h->fast++, h->by_meta++;
            PyObject *r;
            if (nt == 3) {
                uint64_t p[3] = {m[0].data_ptr, m[1].data_ptr, m[2].data_ptr};
                r = call_pointers((Launcher *)c, p, out, 1);
            } else {
                r = launch_entry(entry, (Launcher *)c, a, b, out);
            }
            Py_DECREF(entry), Py_DECREF(c);
            return r;
        }
    }
    Py_ssize_t n = out != Py_None ? 12 : 8;
    PyObject *v[12];
    if (read_part(a, v) < 0)
        return NULL;
    if (read_part(b, v + 4) < 0) {
        for (int i = 0; i < 4; i++)
            Py_DECREF(v[i]);
        return NULL;
    }
    if (n == 12 && read_part(out, v + 8) < 0) {
        for (int i = 0; i < 8; i++)
            Py_DECREF(v[i]);
        return NULL;
    }
    PyObject *entry = NULL, *c = NULL, *r = NULL, *key = NULL, *lookup = NULL;
    PyObject *last = h->last;
    if (last && h->generation == table_generation) {
        Py_INCREF(last); /* the comparisons may run Python code (a subclass's ==): keep the record alive */
        int same = same_as_last(last, out_dtype, v, n);
        if (same == 1) {
            entry = PyTuple_GetItem(last, 2), c = PyTuple_GetItem(last, 3);
            Py_INCREF(entry), Py_INCREF(c);
        }
        Py_DECREF(last);
        if (same < 0)
            goto done;
    }
    if (c) {
        h->fast++;
        if (meta_reader) /* the getters agreed with the remembered key: their metadata is the hit's from now on */
            keep_meta(h, xs, nt);
    } else {
        key = PyTuple_New(n);
        if (!key)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(v[i]);
            PyTuple_SetItem(key, i, v[i]); /* steals the new reference */
        }
        lookup = gemm ? PyTuple_Pack(2, out_dtype, key) : (Py_INCREF(key), key);
        if (!lookup)
            goto done;
        PyObject *table = h->table; /* read again: the getters above may have run Python code */
        if (!table) {
            r = (Py_INCREF(Py_None), Py_None);
            goto done;
        }
        Py_INCREF(table);
        entry = PyDict_GetItemWithError(table, lookup); /* borrowed */
        Py_XINCREF(entry);
        Py_DECREF(table);
        if (!entry) {
            if (!PyErr_Occurred())
                r = (Py_INCREF(Py_None), Py_None);
            goto done;
        }
        c = PyObject_GetAttr(entry, s_c);
        if (!c)
            goto done;
        if (!PyObject_TypeCheck(c, (PyTypeObject *)Launcher_type)) { /* no compiled Launcher: the Python path */
            r = (Py_INCREF(Py_None), Py_None);
            goto done;
        }
        PyObject *record = PyTuple_Pack(4, out_dtype, key, entry, c);
        if (!record)
            goto done;
        PyObject *old = h->last;
        h->last = record;
        Py_XDECREF(old);
        h->generation = table_generation;
        h->looked_up++;
        keep_meta(h, xs, nt); /* read after the getters: what the key was made of */
    }
    r = launch_entry(entry, (Launcher *)c, a, b, out);
done:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(v[i]);
    Py_XDECREF(key);
    Py_XDECREF(lookup);
    Py_XDECREF(entry);
    Py_XDECREF(c);
    return r;
}

static int hot_set_table(HotState *h, PyObject *table) {
    if (table != Py_None && !PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "the hot table is a dict (or None: no table)");
        return -1;
    }
    PyObject *old = h->table;
    h->table = table == Py_None ? NULL : (Py_INCREF(table), table);
    Py_XDECREF(old);
    hot_forget(h);
    return 0;
}

static PyObject *hot_counts(HotState *h) {
    return Py_BuildValue("(KK)", h->fast, h->looked_up);
}

/* Hot(table, gemm): a table's hot call as an object (ptxgen.gemm's: gemm=True, keys (out_dtype, torch_key)). */
typedef struct {
    PyObject_HEAD
    HotState hs;
    int gemm;
} Hot;

static PyObject *Hot_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *table;
    int gemm;
    if ((kwds && PyDict_Size(kwds)) || !PyArg_ParseTuple(args, "Op", &table, &gemm)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Hot(table, gemm)");
        return NULL;
    }
    allocfunc tp_alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Hot *self = (Hot *)tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->gemm = gemm;
    if (hot_set_table(&self->hs, table) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void Hot_dealloc(Hot *self) {
    hot_clear(&self->hs);
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    freefunc free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free(self);
    Py_DECREF(tp);
}

/* Hot.call(a, b, out) (a kernel's table) or Hot.call(out_dtype, a, b, out) (gemm=True) -> out or None */
static PyObject *Hot_call(Hot *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != (self->gemm ? 4 : 3)) {
        PyErr_SetString(PyExc_TypeError, self->gemm ? "call(out_dtype, a, b, out)" : "call(a, b, out)");
        return NULL;
    }
    if (self->gemm)
        return hot_call(&self->hs, 1, args[0], args[1], args[2], args[3]);
    return hot_call(&self->hs, 0, Py_None, args[0], args[1], args[2]);
}

static PyObject *Hot_forget(Hot *self, PyObject *unused) {
    hot_forget(&self->hs);
    Py_RETURN_NONE;
}

static PyObject *Hot_get_counts(Hot *self, void *closure) {
    return hot_counts(&self->hs);
}

static PyObject *Hot_get_meta_hits(Hot *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->hs.by_meta);
}

static PyMethodDef Hot_methods[] = {
    {"call", (PyCFunction)(void (*)(void))Hot_call, METH_FASTCALL,
     "call(a, b, out) or, for ptxgen.gemm's table, call(out_dtype, a, b, out): out (launched) or None (declined)"},
    {"forget", (PyCFunction)Hot_forget, METH_NOARGS, "drop the remembered last hit"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Hot_getset[] = {
    {"counts", (getter)Hot_get_counts, NULL, "(calls served by the remembered hit, calls that looked the key up)", NULL},
    {"meta_hits", (getter)Hot_get_meta_hits, NULL, "remembered-hit calls whose metadata the reader compared (set_meta_reader)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Hot_slots[] = {
    {Py_tp_new, Hot_new},
    {Py_tp_dealloc, Hot_dealloc},
    {Py_tp_methods, Hot_methods},
    {Py_tp_getset, Hot_getset},
    {Py_tp_doc, "A table's hot call: the last hit remembered and checked field by field, else the table's lookup."},
    {0, NULL}};

static PyType_Spec Hot_spec = {"ptxgen.runtime._launcher.Hot", sizeof(Hot), 0, Py_TPFLAGS_DEFAULT, Hot_slots};

/* KernelBase: the base class of ptxgen.api.kernel.CompiledKernel where the launcher was built. Calling the
 * instance, k(a, b[, out]) (out also as a keyword; stream=None allowed), runs the hot call of its table (set by
 * _set_hot_table) here, with no Python frame; anything else, or a declined call, goes to k._call_py(...) with the
 * same arguments. */
typedef struct {
    PyObject_HEAD
    HotState hs;
} KernelBase;

static PyObject *s_call_py, *s_out, *s_stream;

static void KernelBase_dealloc(KernelBase *self) {
    hot_clear(&self->hs);
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    freefunc free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free(self);
    Py_DECREF(tp);
}

static PyObject *KernelBase_call(KernelBase *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t n = PyTuple_Size(args);
    PyObject *out = n == 3 ? PyTuple_GetItem(args, 2) : Py_None;
    int fast = n == 2 || n == 3;
    if (fast && kwargs) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (fast && PyDict_Next(kwargs, &pos, &k, &v)) {
            int is_out = PyUnicode_Check(k) && PyUnicode_Compare(k, s_out) == 0;
            int is_stream = PyUnicode_Check(k) && PyUnicode_Compare(k, s_stream) == 0;
            if (is_out && n == 2)
                out = v;
            else if (!(is_stream && v == Py_None))
                fast = 0;
        }
    }
    if (fast) {
        PyObject *r = hot_call(&self->hs, 0, Py_None, PyTuple_GetItem(args, 0), PyTuple_GetItem(args, 1), out);
        if (!r || r != Py_None)
            return r;
        Py_DECREF(r);
    }
    PyObject *slow = PyObject_GetAttr((PyObject *)self, s_call_py);
    if (!slow)
        return NULL;
    PyObject *r = PyObject_Call(slow, args, kwargs);
    Py_DECREF(slow);
    return r;
}

static PyObject *KernelBase_set_hot_table(KernelBase *self, PyObject *table) {
    if (hot_set_table(&self->hs, table) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *KernelBase_get_counts(KernelBase *self, void *closure) {
    return hot_counts(&self->hs);
}

static PyObject *KernelBase_get_meta_hits(KernelBase *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->hs.by_meta);
}

static PyMethodDef KernelBase_methods[] = {
    {"_set_hot_table", (PyCFunction)KernelBase_set_hot_table, METH_O,
     "_set_hot_table(dict or None): the table (torch_key -> Launch) the instance's hot call serves"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef KernelBase_getset[] = {
    {"_hot_counts", (getter)KernelBase_get_counts, NULL,
     "(calls served by the remembered hit, calls that looked the key up in the table)", NULL},
    {"_hot_meta_hits", (getter)KernelBase_get_meta_hits, NULL,
     "remembered-hit calls whose metadata the reader compared (set_meta_reader)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot KernelBase_slots[] = {
    {Py_tp_call, KernelBase_call},
    {Py_tp_dealloc, KernelBase_dealloc},
    {Py_tp_methods, KernelBase_methods},
    {Py_tp_getset, KernelBase_getset},
    {Py_tp_doc, "The compiled hot call of a CompiledKernel (k(a, b, out) without a Python frame)."},
    {0, NULL}};

static PyType_Spec KernelBase_spec = {"ptxgen.runtime._launcher.KernelBase", sizeof(KernelBase), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, KernelBase_slots};

static PyObject *forget_tables(PyObject *mod, PyObject *unused) {
    table_generation++;
    Py_RETURN_NONE;
}

static PyObject *py_torch_key(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "torch_key(a, b, out)");
        return NULL;
    }
    return torch_key(args[0], args[1], args[2]);
}

static PyObject *set_tensor_type(PyObject *mod, PyObject *t) {
    if (t != Py_None && !PyType_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "set_tensor_type takes a type (or None: no type)");
        return NULL;
    }
    PyObject *old = tensor_type;
    if (t == Py_None) {
        tensor_type = NULL;
        Py_XDECREF(old);
        Py_RETURN_NONE;
    }
    Py_INCREF(t);
    tensor_type = t;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* set_meta_reader(address, types): the metadata reader (the address of _torchmeta.cpp's ptxgen_torch_meta; 0: none)
 * and the exact types it serves (torch.Tensor, torch.nn.Parameter). Every remembered hit's metadata is dropped. */
static PyObject *set_meta_reader(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t address;
    if (nargs != 2 || read_u64(args[0], &address) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "set_meta_reader(address, types)");
        return NULL;
    }
    PyObject *types = PySequence_Tuple(args[1]);
    if (!types)
        return NULL;
    Py_ssize_t n = PyTuple_Size(types);
    if (n > MAX_PLAIN || (address && n < 1)) {
        Py_DECREF(types);
        PyErr_Format(PyExc_ValueError, "set_meta_reader: 1 to %d types", MAX_PLAIN);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyType_Check(PyTuple_GetItem(types, i))) {
            Py_DECREF(types);
            PyErr_SetString(PyExc_TypeError, "set_meta_reader: types are types");
            return NULL;
        }
    meta_reader = NULL;
    for (int i = 0; i < n_plain; i++)
        Py_CLEAR(plain_types[i]);
    n_plain = 0;
    table_generation++; /* no remembered hit keeps metadata read by another reader */
    if (address) {
        for (Py_ssize_t i = 0; i < n; i++) {
            plain_types[i] = PyTuple_GetItem(types, i);
            Py_INCREF(plain_types[i]);
        }
        n_plain = (int)n;
        meta_reader = (meta_fn)(uintptr_t)address;
    }
    Py_DECREF(types);
    Py_RETURN_NONE;
}

/* read_meta(x): what the reader sees of x, (ndim, sizes, strides, scalar_type, device_type, device_index, flags,
 * data_ptr), or None (no reader, not a plain type, or the reader declined); tests compare it with the getters */
static PyObject *py_read_meta(PyObject *mod, PyObject *x) {
    TensorMeta m;
    if (!read_metas(&x, 1, &m))
        Py_RETURN_NONE;
    return Py_BuildValue("(L(LLL)(LLL)iiiiK)", (long long)m.ndim, (long long)m.sizes[0], (long long)m.sizes[1],
                         (long long)m.sizes[2], (long long)m.strides[0], (long long)m.strides[1], (long long)m.strides[2],
                         m.scalar_type, m.device_type, m.device_index, m.flags, (unsigned long long)m.data_ptr);
}

static PyObject *meta_abi(PyObject *mod, PyObject *unused) {
    return PyLong_FromLong(META_ABI);
}

static PyObject *driver_loaded(PyObject *mod, PyObject *unused) {
    return PyBool_FromLong(driver_launch != NULL);
}

static PyMethodDef module_methods[] = {
    {"hot_kernel", (PyCFunction)(void (*)(void))hot_kernel, METH_FASTCALL, "hot_kernel(table, a, b, out) -> out or None"},
    {"hot_gemm", (PyCFunction)(void (*)(void))hot_gemm, METH_FASTCALL, "hot_gemm(table, out_dtype, a, b, out) -> out or None"},
    {"torch_key", (PyCFunction)(void (*)(void))py_torch_key, METH_FASTCALL, "the dispatch key of torch tensors (as launchplan.torch_key)"},
    {"set_tensor_type", set_tensor_type, METH_O, "set_tensor_type(torch.Tensor): the hot calls accept its instances"},
    {"set_meta_reader", (PyCFunction)(void (*)(void))set_meta_reader, METH_FASTCALL,
     "set_meta_reader(address, types): the compiled metadata reader (runtime.torchmeta) and the exact types it serves"},
    {"read_meta", py_read_meta, METH_O, "read_meta(x): the metadata reader's view of x, or None"},
    {"meta_abi", meta_abi, METH_NOARGS, "the size of the metadata record the reader fills (its ABI check)"},
    {"driver_loaded", driver_loaded, METH_NOARGS, "whether libcuda's cuLaunchKernel has been loaded"},
    {"forget_tables", forget_tables, METH_NOARGS, "a table lost entries: drop every remembered hit made before now"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "ptxgen.runtime._launcher",
                                        "The compiled hot path of a prepared ptxgen launch (see launchplan.Launch).", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__launcher(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_c = PyUnicode_InternFromString("_c");
    s_allocate = PyUnicode_InternFromString("_allocate_torch");
    s_call_py = PyUnicode_InternFromString("_call_py");
    s_out = PyUnicode_InternFromString("out");
    s_stream = PyUnicode_InternFromString("stream");
    Launcher_type = PyType_FromSpec(&Launcher_spec);
    if (!s_shape || !s_stride || !s_dtype || !s_get_device || !s_data_ptr || !s_c || !s_allocate || !s_call_py || !s_out ||
        !s_stream || !Launcher_type || PyModule_AddObject(m, "Launcher", Launcher_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Launcher_type);
    PyObject *hot_type = PyType_FromSpec(&Hot_spec);
    if (!hot_type || PyModule_AddObject(m, "Hot", hot_type) < 0) {
        Py_XDECREF(hot_type);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *base_type = PyType_FromSpec(&KernelBase_spec);
    if (!base_type || PyModule_AddObject(m, "KernelBase", base_type) < 0) {
        Py_XDECREF(base_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
