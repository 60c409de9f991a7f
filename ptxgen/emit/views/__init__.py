"""The render contexts of the template pieces, rendered from the frozen plans (numbers and C expressions; the templates
do no layout math): the loader (``loader_view``), the MMA (``mma_view``, block-scaled FP8 ``blockfp8``), the pipeline's
mbarriers (``pipeline_view``), the scheduler and the grouped walk (``schedule_view``, ``grouped_view``), the epilogue
(``epilogue_view``, the fused chain ``chain``, the epilogue order ``order_view``), split-K and stream-K
(``splitk_view``, ``streamk_view``), the K-grouped GEMM's group, K range and K-tail zeroing (``kgrouped_view``).
``ptxgen.emit.render`` composes them into one KernelView."""
