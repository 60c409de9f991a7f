"""One operand's shared memory and how it gets there: the stage layout (``smem_layout``), the operand's descriptors
(``operand``), the tensor map and copies of TMA (``tma``) and one operand's TMA plan (``operand_tma``), and where each
piece of the kernel's dynamic shared memory goes (``smem``)."""
