"""A call's arrays, checked and made readable (pure: no GPU): binding arrays to a spec (``binding``), batched arrays
(``batched``), grouped GEMM arguments (``groupedbind``), the packed copies of what no kernel reads as it is
(``packing``, for the fused door ``fusedany``, for the grouped doors ``groupedpack``), float32 inputs as tf32 or 3xTF32
(``precision``), and which block-FP8 recipe a call's scale_b asks for (``fp8recipe``)."""
