"""What happens to the accumulators after the MMA: the TMA-store epilogue (``epilogue``), the fused epilogue chain
(``fusion``), the direct stores' layout of D (``output``), C read through TMA (``cload``), and the partial sums of
split-K (``splitk``) and of stream-K's last wave (``streamk``)."""
