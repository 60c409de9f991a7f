/* ptxgen.runtime._launcher: what its C files share (the records, the module's state, the functions one file
 * calls in another). The extension is one module built from these files (setup.py: LAUNCHER_SOURCES):
 *
 *   _launcher.c          the module: its functions (set_tensor_type, set_meta_reader, ...), the shared state, init
 *   _launcher_type.c     the Launcher type: reading its constructor's arguments, its methods and attributes
 *   _launcher_patch.c    a launch for three pointers: the pointer checks, the writes into the parameter block
 *                        (raw pointers and tensor maps), the current stream
 *   _launcher_driver.c   libcuda: loading cuLaunchKernel, the launch (with its one context retry)
 *   _launcher_hot.c      the dispatch key of torch tensors and the hot call: the remembered last hit compared
 *                        field by field (or as metadata bytes), else the table lookup
 *   _launcher_hottypes.c the Python types that own a hot call: Hot (a table's) and KernelBase (CompiledKernel's)
 *
 * A call from one file into another is a plain direct call, as it was between static functions of one file: every
 * name declared here is hidden (LAUNCHER_INTERNAL), so no call goes through the PLT and no global through the GOT,
 * and the one symbol the .so exports is PyInit__launcher. The small helpers every file uses are static inline here.
 *
 * A Launcher holds what ptxgen.api.launch.launchplan.Launch prepared once per dispatch key: the CUfunction, grid,
 * block, dynamic shared bytes and the address of the pre-packed parameter block (the void** array that
 * cuLaunchKernel reads, owned by a runtime.params.ParamBlock this object keeps alive), plus, for each of the
 * three operands A, B, D, where its pointer goes in that block: a raw 8-byte pointer parameter, or a 128-byte
 * tensor map whose bytes a Python callable gives for a pointer (runtime.params.MapSlot.bytes_for: its small
 * cache or the encoder). A call reads the operands' data pointers, checks them (aligned as the kernel needs; an out
 * given by the caller must not overlap an input), writes the pointers that changed into the block and calls
 * cuLaunchKernel once. The driver is dlopen'ed ("libcuda.so.1") at first use; no CUDA header is needed: the
 * two prototypes are declared below. Plain CPython stable ABI (3.11), so one build serves later Pythons.
 *
 * Split-K and stream-K launches are Launchers too (one launch each): the calling stream's workspace is one more
 * operand (the last, see WS_STREAMK below).
 *
 * The GIL is held from the pointer writes to the launch, and no Python code runs in between: two threads
 * sharing a Launcher cannot interleave a patch and a launch. Python code (a map's bytes) runs only in the
 * gathering step before; the writes re-check the state afterwards.
 *
 * do not edit the layout rules here without runtime/params.py: the tests compare the bytes both write.
 */
#ifndef PTXGEN_LAUNCHER_H
#define PTXGEN_LAUNCHER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(__GNUC__) && !defined(_WIN32)
#define LAUNCHER_INTERNAL __attribute__((visibility("hidden")))
#else
#define LAUNCHER_INTERNAL
#endif

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned smem, void *stream, void **params, void **extra);
typedef int (*capture_fn)(void *stream, int *status); /* cuStreamIsCapturing */

#define MAP_BYTES 128
#define MAX_SLOTS 4
#define MAX_OPERANDS 8 /* A, B, D, then the pointers a launch patches besides them (a fused chain's, offs, scales) */

/* A workspace operand (the last one; ptxgen.api.launchplan: split-K's and stream-K's, one per (device, stream)): the
 * calls that are not given it take the calling stream's from a few remembered (stream, address) pairs, which the
 * Python side hands over (remember_workspace) after it got the stream's workspace the first time; a stream with none
 * remembered is declined (the Python side gets it). WS_STREAMK also declines a stream that is capturing (a capture
 * gets a fresh workspace from the graph's pool, zeroed in the graph: launchplan.streamk_workspace). */
#define WS_NONE 0
#define WS_STREAMK 2 /* split-K's and stream-K's workspace: zeroed flags, a capturing stream declined */
#define LAUNCH_ABI 2 /* Launcher(..., masks[, workspace]): the Python side uses no build without it (fastlaunch) */
#define WS_STREAMS 4

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
#define MAX_PLAIN 4

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
    int nops;                /* operands: A, B, D and up to MAX_OPERANDS - 3 more (run_all) */
    int nslots[MAX_OPERANDS];
    Slot slots[MAX_OPERANDS][MAX_SLOTS];
    uint64_t cur[MAX_OPERANDS];
    int valid[MAX_OPERANDS];
    unsigned long long launches;
    int ws_kind;             /* WS_NONE, WS_STREAMK: the last operand is the workspace */
    capture_fn capture;      /* WS_STREAMK: cuStreamIsCapturing (or a test's function) */
    int ws_n, ws_next;
    uint64_t ws_stream[WS_STREAMS], ws_addr[WS_STREAMS];
} Launcher;

/* One table's hot call (_launcher_hot.c: the remembered last hit). */
typedef struct {
    PyObject *table;   /* the dict (NULL: no table yet: every call declines) */
    PyObject *last;    /* NULL or (out_dtype, key, entry, launcher) */
    unsigned long long generation;
    unsigned long long fast, looked_up; /* calls served by the remembered hit, by the table lookup */
    unsigned long long by_meta;          /* of the fast ones: those the metadata reader served */
    int meta_n;                          /* 0: no metadata kept with last; else its 2 or 3 tensors' */
    TensorMeta meta[3];                  /* last's tensors as the reader saw them, at the call that matched */
} HotState;

/* ---- the module's state: tensor_type and the interned names in _launcher.c, Launcher_type in _launcher_type.c,
 * driver_launch in _launcher_driver.c, the metadata reader and table_generation in _launcher_hot.c ------------ */
LAUNCHER_INTERNAL extern PyObject *tensor_type; /* torch.Tensor once the Python side has seen torch */
LAUNCHER_INTERNAL extern PyObject *s_shape, *s_stride, *s_dtype, *s_get_device, *s_data_ptr, *s_c, *s_allocate;
LAUNCHER_INTERNAL extern PyObject *s_call_py, *s_out, *s_stream;
LAUNCHER_INTERNAL extern PyObject *Launcher_type; /* the Launcher type object, made at module init */
LAUNCHER_INTERNAL extern launch_fn driver_launch;  /* cuLaunchKernel from libcuda.so.1, found at first use */
LAUNCHER_INTERNAL extern capture_fn driver_capture; /* cuStreamIsCapturing from libcuda.so.1 (with driver_launch) */
LAUNCHER_INTERNAL extern meta_fn meta_reader;
LAUNCHER_INTERNAL extern PyObject *plain_types[MAX_PLAIN];
LAUNCHER_INTERNAL extern int n_plain;
LAUNCHER_INTERNAL extern unsigned long long table_generation;

/* ---- the functions one file calls in another ---------------------------------------------------------------- */
/* _launcher_driver.c */
LAUNCHER_INTERNAL int find_driver(void);
LAUNCHER_INTERNAL int do_launch(Launcher *self, uint64_t stream);
/* _launcher_patch.c */
LAUNCHER_INTERNAL int patch(Launcher *self, const uint64_t *want, int n);
LAUNCHER_INTERNAL int stream_workspace(Launcher *self, uint64_t stream, uint64_t *address);
LAUNCHER_INTERNAL PyObject *call_pointers(Launcher *self, const uint64_t p[3], PyObject *out, int out_given);
LAUNCHER_INTERNAL PyObject *call_tensors(Launcher *self, PyObject *a, PyObject *b, PyObject *out, int out_given);
/* _launcher_hot.c */
LAUNCHER_INTERNAL PyObject *py_read_meta(PyObject *mod, PyObject *x);
LAUNCHER_INTERNAL PyObject *torch_key(PyObject *a, PyObject *b, PyObject *out);
LAUNCHER_INTERNAL PyObject *hot_kernel(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
LAUNCHER_INTERNAL PyObject *hot_gemm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
LAUNCHER_INTERNAL PyObject *hot_call(HotState *h, int gemm, PyObject *out_dtype, PyObject *a, PyObject *b,
                                     PyObject *out);
LAUNCHER_INTERNAL void hot_forget(HotState *h);
LAUNCHER_INTERNAL void hot_clear(HotState *h);
LAUNCHER_INTERNAL int hot_set_table(HotState *h, PyObject *table);
/* the type specs: _launcher_type.c (Launcher), _launcher_hottypes.c (Hot, KernelBase) */
LAUNCHER_INTERNAL extern PyType_Spec Launcher_spec, Hot_spec, KernelBase_spec;

static inline int read_u64(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* tp_free of the object's type, then the reference a heap type's instance holds on its type */
static inline void free_instance(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    freefunc free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free(self);
    Py_DECREF(tp);
}

#endif
