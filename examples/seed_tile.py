"""The seed post's tile, derived: every number it computes by hand, and the store index it uses.

    python examples/seed_tile.py
"""

from ptxgen.derive.tile.explain import atom_picture
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import OperandSpec, TileSpec

t = derive(TileSpec(bm=128, bn=128, bk=32, a=OperandSpec.parse("kmajor-sw64"), b=OperandSpec.parse("mnmajor-sw128")))
print(f"instruction descriptor {t.idesc.hex}")
for op in (t.a, t.b):
    print(f"{op.name.upper()}: {op.major.value}-major {op.swizzle.value}: LBO {op.lbo_bytes} B (field {op.lbo_bytes // 16}), "
          f"SBO {op.sbo_bytes} B, layout type {op.layout_type}, aligned to {op.alignment_bytes} B")
    for s in op.k_steps:
        print(f"   K {s.k:>3}: start +{s.start_offset_bytes:<5} desc {s.descriptor.hex}")
print("\n".join(atom_picture(t.a)))
# The loader's index: the same terms the kernel's store expression is rendered from
for r in range(4):
    print(f"row {r}: cells at", [t.a.store.physical(r, q) for q in range(4)])
