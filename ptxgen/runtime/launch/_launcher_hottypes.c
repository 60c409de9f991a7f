/* ptxgen.runtime._launcher: the Python types that own a hot call (a HotState, _launcher_hot.c).
 *
 * Hot(table, gemm): a table's hot call as an object (ptxgen.gemm's: gemm=True, keys (out_dtype, torch_key)).
 * KernelBase: the base class of ptxgen.api.kernel.CompiledKernel where the launcher was built. Calling the
 * instance, k(a, b[, out]) (out also as a keyword; stream=None allowed), runs the hot call of its table (set by
 * _set_hot_table) here, with no Python frame; anything else, or a declined call, goes to k._call_py(...) with the
 * same arguments. See _launcher.h for the files of the module. */
#include "_launcher.h"

/* The instance of KernelBase, and the head of Hot's: the object and its hot call. */
typedef struct {
    PyObject_HEAD
    HotState hs;
} HotOwner;

typedef HotOwner KernelBase;

typedef struct {
    HotOwner owner;
    int gemm;
} Hot;

/* ---- what both types share -------------------------------------------------------------------------------- */
static void HotOwner_dealloc(HotOwner *self) {
    hot_clear(&self->hs);
    free_instance((PyObject *)self);
}

static PyObject *HotOwner_get_counts(HotOwner *self, void *closure) {
    return Py_BuildValue("(KK)", self->hs.fast, self->hs.looked_up);
}

static PyObject *HotOwner_get_meta_hits(HotOwner *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->hs.by_meta);
}

/* ---- Hot ------------------------------------------------------------------------------------------------------ */
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
    if (hot_set_table(&self->owner.hs, table) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* Hot.call(a, b, out) (a kernel's table) or Hot.call(out_dtype, a, b, out) (gemm=True) -> out or None */
static PyObject *Hot_call(Hot *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != (self->gemm ? 4 : 3)) {
        PyErr_SetString(PyExc_TypeError, self->gemm ? "call(out_dtype, a, b, out)" : "call(a, b, out)");
        return NULL;
    }
    if (self->gemm)
        return hot_call(&self->owner.hs, 1, args[0], args[1], args[2], args[3]);
    return hot_call(&self->owner.hs, 0, Py_None, args[0], args[1], args[2]);
}

static PyObject *Hot_forget(Hot *self, PyObject *unused) {
    hot_forget(&self->owner.hs);
    Py_RETURN_NONE;
}

static PyMethodDef Hot_methods[] = {
    {"call", (PyCFunction)(void (*)(void))Hot_call, METH_FASTCALL,
     "call(a, b, out) or, for ptxgen.gemm's table, call(out_dtype, a, b, out): out (launched) or None (declined)"},
    {"forget", (PyCFunction)Hot_forget, METH_NOARGS, "drop the remembered last hit"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Hot_getset[] = {
    {"counts", (getter)HotOwner_get_counts, NULL, "(calls served by the remembered hit, calls that looked the key up)", NULL},
    {"meta_hits", (getter)HotOwner_get_meta_hits, NULL, "remembered-hit calls whose metadata the reader compared (set_meta_reader)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Hot_slots[] = {
    {Py_tp_new, Hot_new},
    {Py_tp_dealloc, HotOwner_dealloc},
    {Py_tp_methods, Hot_methods},
    {Py_tp_getset, Hot_getset},
    {Py_tp_doc, "A table's hot call: the last hit remembered and checked field by field, else the table's lookup."},
    {0, NULL}};

PyType_Spec Hot_spec = {"ptxgen.runtime._launcher.Hot", sizeof(Hot), 0, Py_TPFLAGS_DEFAULT, Hot_slots};

/* ---- KernelBase ----------------------------------------------------------------------------------------------- */
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

static PyMethodDef KernelBase_methods[] = {
    {"_set_hot_table", (PyCFunction)KernelBase_set_hot_table, METH_O,
     "_set_hot_table(dict or None): the table (torch_key -> Launch) the instance's hot call serves"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef KernelBase_getset[] = {
    {"_hot_counts", (getter)HotOwner_get_counts, NULL,
     "(calls served by the remembered hit, calls that looked the key up in the table)", NULL},
    {"_hot_meta_hits", (getter)HotOwner_get_meta_hits, NULL,
     "remembered-hit calls whose metadata the reader compared (set_meta_reader)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot KernelBase_slots[] = {
    {Py_tp_call, KernelBase_call},
    {Py_tp_dealloc, HotOwner_dealloc},
    {Py_tp_methods, KernelBase_methods},
    {Py_tp_getset, KernelBase_getset},
    {Py_tp_doc, "The compiled hot call of a CompiledKernel (k(a, b, out) without a Python frame)."},
    {0, NULL}};

PyType_Spec KernelBase_spec = {"ptxgen.runtime._launcher.KernelBase", sizeof(KernelBase), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, KernelBase_slots};
