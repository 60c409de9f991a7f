"""A call's arrays, checked and made readable (pure: no GPU): binding arrays to a spec (``binding``), batched arrays
(``batched``), grouped GEMM arguments (``groupedbind``), and the packed copies of what no kernel reads as it is
(``packing``, for the fused door ``fusedany``, for the grouped doors ``groupedpack``)."""
