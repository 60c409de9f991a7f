"""Scale factors: FP8 with DeepSeek-style block scales on wgmma (``blockfp8``, the order of a consumer's steps per K
block ``bfp8steps``, its consumer slabs ``bfp8slabs``, the tile a problem gets ``bfp8tiles``, A's scales by TMA
``sfa_tma``, 1 x 128 scales on both operands ``bfp8cols``) and the block-scaled tcgen05 kinds' scale factors
(``scales``, in CUTLASS's 512-byte atoms ``sf_atoms``)."""
