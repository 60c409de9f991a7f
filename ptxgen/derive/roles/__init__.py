"""Who does what, and when: warp roles and the mbarrier ring between loader and MMA (``pipeline``), the named
barriers (``barriers``), the tile scheduler (``schedule``), the grouped walk over G GEMMs (``grouped``) and the
K-grouped GEMM's items over groups that split K (``kgrouped``), the
consumers' turns at the epilogue (``epiorder``), the CTA pair of ``--cta-group 2`` (``ctapair``), and how many CTAs
and how much Tensor Memory fit on one SM (``tmemfit``)."""
