// Does CuTe/CUTLASS make block-scaled CTA-pair (2SM) configurations with M = 128? One case per -DCASE=n; each
// case either compiles (and prints what it built) or stops at a static_assert (tools/cute_pair/README.md).
//   1: the atom SM100_MMA_MXF8F6F4_2x1SM_SS (e4m3 x e4m3, ue8m0) at M = 128
//   2: the atom SM100_MMA_MXF4_2x1SM_SS (e2m1 x e2m1, ue8m0, VS 32) at M = 128
//   3: the sm100 block-scaled CollectiveBuilder, mxf8f6f4 (mx_float8_t<e4m3>), 2SM schedule, tile 128x128x128
//   4: the same builder, mxf4 (mx_float4_t<e2m1>), 2SM schedule, tile 128x128x256
//   5: the same builder as 3 at tile 256x128x128 (the control: M = 256 builds)
#include <cstdio>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cute/atom/mma_traits_sm100.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
using namespace cute;
using Km = UMMA::Major;
using cutlass::float_e4m3_t; using cutlass::float_e2m1_t; using cutlass::float_ue8m0_t;

template <class Elt, int M, int K, class Schedule>
using Builder = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp,
    Elt, cutlass::layout::RowMajor, 32, Elt, cutlass::layout::ColumnMajor, 32, float,
    Shape<Int<M>, _128, Int<K>>, Shape<_2, _1, _1>, cutlass::gemm::collective::StageCount<2>, Schedule>::CollectiveOp;

int main() {
#if CASE == 1
  using Op = SM100_MMA_MXF8F6F4_2x1SM_SS<float_e4m3_t, float_e4m3_t, float, float_ue8m0_t, 128, 128, Km::K, Km::K>;
  printf("case 1: atom built (%d B)\n", int(sizeof(Op)));  // sizeof instantiates the atom and its static_asserts
#elif CASE == 2
  using Op = SM100_MMA_MXF4_2x1SM_SS<float_e2m1_t, float_e2m1_t, float, float_ue8m0_t, 128, 128, 32, Km::K, Km::K>;
  printf("case 2: atom built (%d B)\n", int(sizeof(Op)));
#elif CASE == 3 || CASE == 5
  using C = Builder<cutlass::mx_float8_t<float_e4m3_t>, CASE == 3 ? 128 : 256, 128,
                    cutlass::gemm::KernelTmaWarpSpecialized2SmMxf8f6f4Sm100>;
  printf("case %d: SmemLayoutAtomSFA ", CASE); print(typename C::SmemLayoutAtomSFA{}); printf("\n");
#elif CASE == 4
  using C = Builder<cutlass::mx_float4_t<float_e2m1_t>, 128, 256, cutlass::gemm::KernelTmaWarpSpecialized2SmMxf4Sm100>;
  printf("case 4: SmemLayoutAtomSFA "); print(typename C::SmemLayoutAtomSFA{}); printf("\n");
#endif
  return 0;
}
