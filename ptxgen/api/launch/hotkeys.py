"""The dispatch keys and hot tables of a prepared launch (:class:`ptxgen.api.launch.launchplan.Launch`): the key of
torch tensors (:func:`torch_key`, read in one C call where the compiled launcher was built: :data:`fast_torch_key`) and
of arrays of any library (:func:`info_key`), ``torch.Tensor`` once torch is imported (:func:`tensor_type`), and the
compiled launcher's hot calls over a table of launches (:class:`LaunchTable`, :func:`hot_table`, :data:`KernelBase`),
each remembering its table's last hit and comparing a call's metadata with it field by field before any key is built.
Without the compiled launcher each falls back to its Python form."""

from __future__ import annotations

import sys

from ...runtime.launch.fastlaunch import compiled_module


def torch_key(a, b, out):
    """The dispatch key of three torch tensors (out may be None), read without DLPack."""
    if out is None:
        return (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device())
    return (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(),
            out.shape, out.stride(), out.dtype, out.get_device())


def _fast_torch_key():
    mod = compiled_module()
    return torch_key if mod is None else mod.torch_key


# torch_key's tuple read in one C call where the compiled launcher was built (the hot paths of the grouped and block-FP8
# doors key their prepared launches by pairs and triples of it), else torch_key itself
fast_torch_key = _fast_torch_key()


def info_key(ai, bi, oi):
    """The dispatch key from ArrayInfo (arrays of any library)."""
    def one(i):
        return None if i is None else (i.library, i.shape, i.strides, i.dtype, i.device)

    return (one(ai), one(bi), one(oi))


_TENSOR: list = [None]


def tensor_type():
    """``torch.Tensor`` once torch is imported (never imports it); None before."""
    t = _TENSOR[0]
    if t is None:
        torch = sys.modules.get("torch")
        if torch is not None:
            t = _TENSOR[0] = torch.Tensor
            mod = compiled_module()
            if mod is not None:
                mod.set_tensor_type(t)
                from ...runtime.launch import torchmeta

                torchmeta.start(torch, mod)  # the metadata reader: loaded, or built in the background (optional)
    return t


def _hot_functions():
    mod = compiled_module()
    if mod is None:
        return None, None
    return mod.hot_kernel, mod.hot_gemm


# The compiled hot calls (None without the compiled launcher): ``hot_kernel(table, a, b, out)`` and
# ``hot_gemm(table, out_dtype, a, b, out)`` return ``out`` when they launched, None when the Python path
# must run (not torch tensors, a key not in ``table``, a pointer rule, no compiled Launch for the entry).
# They build the key and look it up on every call; the hot path proper is :func:`hot_table` (``Hot.call``) and
# :data:`KernelBase` (``CompiledKernel.__call__``), which remember the last hit.
hot_kernel, hot_gemm = _hot_functions()


class LaunchTable(dict):
    """A hot table (dispatch key -> :class:`Launch`). The compiled hot calls remember their last hit and check a
    call's metadata against it field by field (``_launcher_hot.c``: HotState); a table that loses entries (clear, pop,
    popitem, del) tells them (``forget_tables``), so no call reaches a Launch its table let go."""

    __slots__ = ()

    def clear(self) -> None:
        super().clear()
        _forget()

    def pop(self, *args):
        try:
            return super().pop(*args)
        finally:
            _forget()

    def popitem(self):
        try:
            return super().popitem()
        finally:
            _forget()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        _forget()


def _forget() -> None:
    mod = compiled_module()
    if mod is not None:
        mod.forget_tables()


def hot_table(table: LaunchTable, gemm: bool = False):
    """The compiled hot call of ``table`` (``.call(a, b, out)``, or ``.call(out_dtype, a, b, out)`` for
    ptxgen.gemm's table with ``gemm=True``), or None without the compiled launcher."""
    mod = compiled_module()
    return None if mod is None else mod.Hot(table, gemm)


def _kernel_base():
    mod = compiled_module()
    return object if mod is None else mod.KernelBase


# CompiledKernel's base class: the compiled KernelBase (``k(a, b, out)`` runs its hot call in C, no Python frame;
# a declined call goes on to ``CompiledKernel._call_py``), or ``object`` without the compiled launcher.
KernelBase = _kernel_base()
