/* ptxgen.runtime._launcher: the compiled hot path of a prepared launch (see ptxgen.api.launch.launchplan.Launch). This
 * file is the module: its functions (set_tensor_type, set_meta_reader, forget_tables, ...; torch_key, hot_kernel,
 * hot_gemm and read_meta come from _launcher_hot.c), the state they set, and its init, which makes the types
 * Launcher (_launcher_type.c), Hot and KernelBase (_launcher_hottypes.c). What the files share, and which file
 * does what: _launcher.h. */
#include "_launcher.h"

PyObject *tensor_type = NULL;
PyObject *s_shape, *s_stride, *s_dtype, *s_get_device, *s_data_ptr, *s_c, *s_allocate;
PyObject *s_call_py, *s_out, *s_stream;

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
    tensor_type = t == Py_None ? NULL : (Py_INCREF(t), t);
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

static PyObject *meta_abi(PyObject *mod, PyObject *unused) {
    return PyLong_FromLong(META_ABI);
}

static PyObject *driver_loaded(PyObject *mod, PyObject *unused) {
    return PyBool_FromLong(driver_launch != NULL);
}

static PyMethodDef module_methods[] = {
    {"hot_kernel", (PyCFunction)(void (*)(void))hot_kernel, METH_FASTCALL, "hot_kernel(table, a, b, out) -> out or None"},
    {"hot_gemm", (PyCFunction)(void (*)(void))hot_gemm, METH_FASTCALL, "hot_gemm(table, out_dtype, a, b, out) -> out or None"},
    {"torch_key", (PyCFunction)(void (*)(void))py_torch_key, METH_FASTCALL, "the dispatch key of torch tensors (as hotkeys.torch_key)"},
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

/* the type made from spec, added to m as name (the module holds it: a borrowed reference), or NULL */
static PyObject *add_type(PyObject *m, const char *name, PyType_Spec *spec) {
    PyObject *t = PyType_FromSpec(spec);
    if (!t || PyModule_AddObject(m, name, t) < 0) {
        Py_XDECREF(t);
        return NULL;
    }
    return t;
}

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
    if (!s_shape || !s_stride || !s_dtype || !s_get_device || !s_data_ptr || !s_c || !s_allocate || !s_call_py || !s_out ||
        !s_stream || !(Launcher_type = add_type(m, "Launcher", &Launcher_spec))) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Launcher_type); /* the hot calls' type check holds its own reference */
    if (PyModule_AddIntConstant(m, "LAUNCH_ABI", LAUNCH_ABI) < 0 ||
        PyModule_AddIntConstant(m, "WS_STREAMK", WS_STREAMK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (!add_type(m, "Hot", &Hot_spec) || !add_type(m, "KernelBase", &KernelBase_spec)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
