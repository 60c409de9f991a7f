// ptxgen's metadata reader: a torch tensor's sizes, strides, scalar type, device and data pointer read from its
// at::Tensor, for the compiled launcher's hot call (_launcher.c: set_meta_reader). Reading them through the Python
// getters (x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr()) costs about 0.3 us each, 15 of them per call;
// here the whole record costs a few ns.
//
// Built against the torch in use, on first use, by ptxgen.runtime.torchmeta (a C++ compiler and torch's headers;
// cached in the ptxgen cache folder, keyed by this file and the torch build) and loaded with ctypes. Optional: where
// it cannot be built the launcher reads the getters, with the same results. The loader checks the record against
// the getters on a few tensors before handing it over.
//
// The caller holds the GIL and passes only objects whose type is exactly torch.Tensor or torch.nn.Parameter.
// Nothing here calls Python, and no C++ exception leaves: anything unexpected declines (returns nonzero), and the
// launcher reads the getters instead.
//
// do not change PtxgenTensorMeta without _launcher.h's TensorMeta (ptxgen_torch_meta_abi is checked at load).
#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <cstring>

extern "C" {

struct PtxgenTensorMeta {
  int64_t ndim;
  int64_t sizes[3];
  int64_t strides[3];
  int32_t scalar_type, device_type, device_index, flags;  // flags: 1 conjugate bit, 2 negative bit
  uint64_t data_ptr;
};

__attribute__((visibility("default"))) int ptxgen_torch_meta_abi(void) {
  return static_cast<int>(sizeof(PtxgenTensorMeta));
}

// 0: *m describes obj (a strided tensor of 1 to 3 dimensions, no Python dispatch, no symbolic sizes); else 1.
__attribute__((visibility("default"))) int ptxgen_torch_meta(PyObject* obj, PtxgenTensorMeta* m) noexcept {
  try {
    const at::Tensor& t = THPVariable_Unpack(obj);
    if (!t.defined())
      return 1;
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (impl->is_python_dispatch() || impl->is_nested() || impl->layout() != c10::kStrided ||
        impl->has_symbolic_sizes_strides())
      return 1;
    const int64_t nd = impl->dim();
    if (nd < 1 || nd > 3)
      return 1;
    std::memset(m, 0, sizeof *m);
    m->ndim = nd;
    c10::IntArrayRef sizes = impl->sizes(), strides = impl->strides();
    for (int64_t i = 0; i < nd; i++) {
      m->sizes[i] = sizes[i];
      m->strides[i] = strides[i];
    }
    m->scalar_type = static_cast<int32_t>(impl->dtype().toScalarType());
    const c10::Device dev = impl->device();
    m->device_type = static_cast<int32_t>(dev.type());
    m->device_index = static_cast<int32_t>(dev.index());
    m->flags = (impl->is_conj() ? 1 : 0) | (impl->is_neg() ? 2 : 0);
    m->data_ptr = reinterpret_cast<uint64_t>(t.data_ptr());  // as Tensor.data_ptr() reads it
    return 0;
  } catch (...) {
    return 1;
  }
}

}  // extern "C"
