"""Is my hand-written descriptor right for this layout? Decode it, lint it, and draw what it reads.

    python examples/check_my_descriptor.py 0x4000402000010002   # a 128B-swizzle descriptor over SW64 data
"""

import sys

from ptxgen.isa.descriptors import lint_smem_descriptor
from ptxgen.emit.pictures.svg import layout_svg
from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.isa.types import Arch

raw = int(sys.argv[1] if len(sys.argv) > 1 else "0x4000402000010002", 16)
t = derive(make_spec(bm=128, bn=128, bk=32, a="kmajor-sw64"))
rep = lint_smem_descriptor(Arch.SM100A, raw)
print(rep.fields, "valid" if rep.valid else rep.problems)
print("ptxgen derives, for the same K-step:", t.a.k_steps[1].descriptor.hex)
with open("my_descriptor.svg", "w") as f:
    f.write(layout_svg(t, ("a",), decode=raw))
print("wrote my_descriptor.svg: cells your descriptor reads as the wrong data are red")
