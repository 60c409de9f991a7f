"""The fused epilogue chain's spec (``--fuse``): which optional steps a kernel has, and the parser of the flag's
value. A leaf: the chain's plan (:mod:`ptxgen.derive.store.fusion`) and the per-thread loads
(:mod:`ptxgen.derive.store.fusion_loads`) read it."""

from __future__ import annotations

from dataclasses import dataclass

from ...isa.epiops import BIAS_DTYPES, Activation, BiasAxis, ScaleMode
from ...isa.types import DType, SpecError

FLAG = "--fuse"


@dataclass(frozen=True)
class ChainSpec:
    """Which optional steps the kernel has (compile time). alpha, beta and the pointers are kernel arguments."""

    alpha: bool = False  # asked for explicitly; every chain takes alpha as an argument
    c: bool = False
    bias: BiasAxis | None = None
    bias_dtype: DType = DType.BF16
    activation: Activation = Activation.NONE
    residual: bool = False
    fp8_scale: ScaleMode | None = None
    c_tma: bool = False  # C read through TMA into the store staging buffers (ptxgen.derive.store.cload); else global loads
    aux: bool = False  # store the pre-activation value (after bias, before the activation) to AUX[r, n]
    dact: Activation = Activation.NONE  # the backward step: y x act'(AUX[r, n]) in the activation's place
    rowscale: bool = False  # step 0: acc x scale_a[r] x scale_b[n] (f32 vectors, M and N long), before alpha

    def __post_init__(self):
        if self.bias is None:
            object.__setattr__(self, "bias_dtype", DType.BF16)  # no bias: its type means nothing
        if not self.c:
            object.__setattr__(self, "c_tma", False)  # no C: how it would be read means nothing

    @property
    def token(self) -> str:
        """The canonical ``--fuse`` value, in chain order."""
        parts = ["rowscale"] if self.rowscale else []
        if self.alpha and not (self.rowscale or self.c or self.bias or self.activation is not Activation.NONE or self.residual or self.fp8_scale
                               or self.dact is not Activation.NONE):
            parts.append("alpha")
        if self.c:
            parts.append("c=tma" if self.c_tma else "c")
        if self.bias is not None:
            parts.append(f"bias={self.bias.value}:{self.bias_dtype.value}")
        if self.aux:
            parts.append("aux")
        if self.activation is not Activation.NONE:
            parts.append(f"act={self.activation.value}")
        if self.dact is not Activation.NONE:
            parts.append(f"dact={self.dact.value}")
        if self.residual:
            parts.append("residual")
        if self.fp8_scale is not None:
            parts.append(f"scale={self.fp8_scale.value}")
        return ",".join(parts)

    @property
    def name_suffix(self) -> str:
        s = "_fq" if self.rowscale else "_f"
        if self.c:
            s += "ct" if self.c_tma else "c"
        if self.bias is not None:
            s += f"b{self.bias.value[0]}{self.bias_dtype.value}"
        if self.aux:
            s += "z"
        s += self.activation.short
        if self.dact is not Activation.NONE:
            s += "d" + self.dact.short
        if self.residual:
            s += "r"
        if self.fp8_scale is not None:
            s += f"s{self.fp8_scale.value[0]}"
        return s if s != "_f" else "_fa"

    def aux_dtype(self, out: DType) -> DType:
        """C's and the residual's element type: the output's, bf16 when the output is FP8."""
        return DType.BF16 if out.bits == 8 else out

    def operands(self) -> tuple[str, ...]:
        """Operands that are read per output element, in chain order."""
        return tuple(n for n, on in (("scale_a", self.rowscale), ("scale_b", self.rowscale), ("c", self.c), ("bias", self.bias is not None), ("aux", self.dact is not Activation.NONE),
                                     ("residual", self.residual), ("scale", self.fp8_scale is not None)) if on)

    def stores(self) -> tuple[str, ...]:
        """Operands written per output element beside D: the pre-activation ``aux``."""
        return ("aux",) if self.aux else ()

    def to_json(self) -> dict:
        return {
            "token": self.token,
            "c": self.c,
            "bias": None if self.bias is None else {"axis": self.bias.value, "dtype": self.bias_dtype.value},
            "activation": self.activation.value,
            "residual": self.residual,
            "fp8_scale": None if self.fp8_scale is None else self.fp8_scale.value,
        } | ({"c_tma": True} if self.c_tma else {}) | ({"aux": True} if self.aux else {}) | (
            {"dact": self.dact.value} if self.dact is not Activation.NONE else {}) | ({"rowscale": True} if self.rowscale else {})


def parse_chain(raw) -> ChainSpec | None:
    """``--fuse`` value -> ChainSpec (None for '' / None / 'none'). Items are comma-separated, in any order:
    ``alpha``, ``c``, ``bias=col|row[:f32|bf16|f16]``, ``aux``, ``act=relu|gelu|gelu_tanh|gelu_erf|silu`` (or the bare
    name), ``dact=relu|gelu|gelu_tanh|gelu_erf|silu`` (or the bare name with a ``d``: ``dgelu``), ``residual``,
    ``scale=tensor|row``, ``rowscale`` (step 0: acc x scale_a[r] x scale_b[n])."""
    if raw is None or isinstance(raw, ChainSpec):
        return raw
    if not isinstance(raw, str):
        raise SpecError(FLAG, raw, "must be a comma-separated list of epilogue steps", _LEGAL)
    text = raw.strip().lower()
    if text in ("", "none"):
        return None
    v: dict = {}
    for item in (t.strip() for t in text.split(",")):
        key, _, arg = item.partition("=")
        if key in ACT_TOKENS:
            key, arg = "act", key
        elif key[:1] == "d" and key[1:] in ACT_TOKENS:
            key, arg = "dact", key[1:]
        name = {"alpha": "alpha", "c": "c", "beta": "c", "bias": "bias", "act": "activation", "residual": "residual",
                "scale": "fp8_scale", "aux": "aux", "dact": "dact",
                "rowscale": "rowscale"}.get(key)
        if name is None or name in v:
            rule = "names a step twice" if name in v else f"has an unknown step {item!r}"
            raise SpecError(FLAG, raw, rule, _LEGAL)
        try:
            if name == "bias":
                axis, _, dt = arg.partition(":")
                v["bias"] = BiasAxis.parse(axis or "col")
                if dt:
                    v["bias_dtype"] = DType(dt)
                    if v["bias_dtype"] not in BIAS_DTYPES:
                        raise ValueError(dt)
            elif name in ("activation", "dact"):
                v[name] = Activation.parse(arg)
                if name == "dact" and v[name] is Activation.NONE:
                    raise ValueError(arg)
            elif name == "fp8_scale":
                v[name] = ScaleMode.parse(arg or "tensor")
            elif name == "c" and arg:
                if arg != "tma":
                    raise ValueError(arg)
                v["c"] = v["c_tma"] = True
            elif arg:
                raise ValueError(arg)
            else:
                v[name] = True
        except ValueError:
            raise SpecError(FLAG, raw, f"step {item!r} has an illegal argument", _LEGAL) from None
    v["alpha"] = True
    return ChainSpec(**v)


ACT_TOKENS = ("relu", "gelu", "gelu_tanh", "gelu_erf", "silu")
_LEGAL = ("rowscale, alpha, c[=tma], bias=col|row[:f32|bf16|f16], aux, act=relu|gelu_tanh|gelu_erf|silu or "
          "dact=relu|gelu_tanh|gelu_erf|silu, residual, scale=tensor|row (comma-separated, each at most once; they run in "
          "that order)")
