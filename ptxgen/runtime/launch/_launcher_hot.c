/* ptxgen.runtime._launcher: the dispatch key of torch tensors and the hot call of a table.
 *
 * A HotState serves one table (torch_key -> Launch, or (out_dtype, torch_key) -> Launch for ptxgen.gemm) and
 * remembers the last key it found there with its Launch and Launcher. A call reads the same values the key is made
 * of (x.shape, x.stride(), x.dtype, x.get_device() of a, b and out) and compares each with the remembered key's
 * (PyObject_RichCompareBool: identity, else ==, as the table's own lookup compares keys). All equal: the remembered
 * Launch is the one the table holds for this key, and no tuple is built, hashed or looked up. Any difference (another
 * shape, a tensor resized or re-strided in place, another dtype or device, out given or not): the key is built and
 * looked up as before, and a hit there becomes the remembered one. The tensors' metadata is read on every call: an
 * object's identity says nothing about its shape (resize_, as_strided_, set_ keep it). Where the metadata reader
 * is set (set_meta_reader), the remembered hit's metadata is compared as bytes instead of the getters' values.
 *
 * A table that loses entries (LaunchTable.clear/pop/del: ptxgen.api.launch.launchplan) calls forget_tables(): every
 * remembered hit made before it is dropped (a global generation count), so no call reaches a Launch its table let go.
 *
 * hot_kernel and hot_gemm are the module-level hot calls that keep nothing between calls (key, lookup, launch).
 * See _launcher.h for the files of the module. */
#include "_launcher.h"

meta_fn meta_reader = NULL;
PyObject *plain_types[MAX_PLAIN];
int n_plain = 0;
unsigned long long table_generation = 1;

/* ---- the metadata reader (set by the module's set_meta_reader) ----------------------------------------------- */
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

/* read_meta(x): what the reader sees of x, (ndim, sizes, strides, scalar_type, device_type, device_index, flags,
 * data_ptr), or None (no reader, not a plain type, or the reader declined); tests compare it with the getters */
PyObject *py_read_meta(PyObject *mod, PyObject *x) {
    TensorMeta m;
    if (!read_metas(&x, 1, &m))
        Py_RETURN_NONE;
    return Py_BuildValue("(L(LLL)(LLL)iiiiK)", (long long)m.ndim, (long long)m.sizes[0], (long long)m.sizes[1],
                         (long long)m.sizes[2], (long long)m.strides[0], (long long)m.strides[1], (long long)m.strides[2],
                         m.scalar_type, m.device_type, m.device_index, m.flags, (unsigned long long)m.data_ptr);
}

/* ---- the dispatch key of torch tensors ------------------------------------------------------------------ */
static int is_tensor(PyObject *x) {
    return Py_TYPE(x) == (PyTypeObject *)tensor_type || PyObject_IsInstance(x, tensor_type) == 1;
}

/* 1: a, b and out (unless None) are torch tensors (set_tensor_type) */
static inline int torch_tensors(PyObject *a, PyObject *b, PyObject *out) {
    return tensor_type && is_tensor(a) && is_tensor(b) && (out == Py_None || is_tensor(out));
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


/* (x.shape, x.stride(), x.dtype, x.get_device()) into t[at:at+4] */
static int key_part(PyObject *t, Py_ssize_t at, PyObject *x) {
    PyObject *v[4];
    if (read_part(x, v) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        PyTuple_SetItem(t, at + i, v[i]); /* steals */
    return 0;
}

/* The same tuple as ptxgen.api.launch.hotkeys.torch_key(a, b, out). */
PyObject *torch_key(PyObject *a, PyObject *b, PyObject *out) {
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
/* ---- the remembered last hit: a hot call without building, hashing or looking up the key ---------------- */
void hot_forget(HotState *h) {
    Py_CLEAR(h->last);
    h->meta_n = 0;
}

void hot_clear(HotState *h) {
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
static inline PyObject *launch_entry(PyObject *entry, Launcher *c, PyObject *a, PyObject *b, PyObject *out) {
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
PyObject *hot_call(HotState *h, int gemm, PyObject *out_dtype, PyObject *a, PyObject *b, PyObject *out) {
    if (!h->table || !torch_tensors(a, b, out))
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

int hot_set_table(HotState *h, PyObject *table) {
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

/* ---- the module-level hot calls: key, lookup, launch ------------------------------------------------------ */
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
    PyObject *r = launch_entry(entry, (Launcher *)c, a, b, out);
    Py_DECREF(c);
    Py_DECREF(entry);
    return r;
}

/* The key of a, b, out (for ptxgen.gemm's table: (out_dtype, torch_key); out_dtype NULL: a kernel's table), its
 * lookup in table and the launch: out, or None (not torch tensors, a key not seen, or a pointer rule). */
static inline PyObject *hot_lookup(PyObject *table, PyObject *out_dtype, PyObject *a, PyObject *b, PyObject *out) {
    if (!torch_tensors(a, b, out))
        Py_RETURN_NONE;
    PyObject *key = torch_key(a, b, out);
    if (!key)
        return NULL;
    if (out_dtype) {
        PyObject *inner = key;
        key = PyTuple_New(2);
        if (!key) {
            Py_DECREF(inner);
            return NULL;
        }
        Py_INCREF(out_dtype);
        PyTuple_SetItem(key, 0, out_dtype);
        PyTuple_SetItem(key, 1, inner);
    }
    PyObject *r = hot(table, key, a, b, out);
    Py_DECREF(key);
    return r;
}

/* hot_kernel(table, a, b, out): CompiledKernel's hot path. table: torch_key -> Launch (with ._c). Returns
 * out (launched), or None (not torch tensors, a key not seen, or a pointer rule: the Python path follows). */
PyObject *hot_kernel(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hot_kernel(table, a, b, out)");
        return NULL;
    }
    return hot_lookup(args[0], NULL, args[1], args[2], args[3]);
}

/* hot_gemm(table, out_dtype, a, b, out): ptxgen.gemm's hot path; table: (out_dtype, torch_key) -> Launch. */
PyObject *hot_gemm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hot_gemm(table, out_dtype, a, b, out)");
        return NULL;
    }
    return hot_lookup(args[0], args[1], args[2], args[3], args[4]);
}
