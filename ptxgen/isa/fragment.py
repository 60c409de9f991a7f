"""The wgmma m64nNk* D fragment: which rows and columns of the accumulator each thread of a warpgroup holds
(PTX ISA 9.7.15.5.1 'Register Fragments and Shared Memory Matrix Layouts', the D fragment figures): warp w holds rows
16w..16w+15; lane l holds rows 16w + l / 4 and 8 rows below, and in each group of 8 columns the pair 2 (l % 4), + 1,
as registers 4g, 4g+1 (first row) and 4g+2, 4g+3 (second row)."""

WGMMA_WARP_ROWS = 16  # warp w of a warpgroup holds rows 16w..16w+15 of the m64nN D fragment
WGMMA_GROUP_COLS = 8  # 4 registers of a thread cover 8 columns: 2 adjacent columns in 2 rows 8 apart
WGMMA_ROW_HALF = 8
WGMMA_GROUP_REGS = 4  # registers 4g, 4g+1 (row r) and 4g+2, 4g+3 (row r + 8) of group g
LANES_PER_ROW = 4  # wgmma: lanes 4r..4r+3 of a warp hold row r (and r + 8)
WARP_LANES = 32
