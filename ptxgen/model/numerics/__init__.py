"""Independent models and float64 references of the values a kernel must produce (they import nothing of ptxgen but
each other): block-scaled FP8 (``bfp8model``, its grouped form ``groupbfp8model`` and consumer slabs ``slabmodel``),
which scale factor multiplies each element of a block-scaled MMA (``sfmodel``), and the references of the MX formats
(``mxref``) and of the fused epilogue chain (``chainref``)."""
