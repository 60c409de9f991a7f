#include <cstdio>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm100.hpp>
using namespace cute;

template <class Atom, class SmemAtomA, class SmemAtomB, int M, int N, int K>
void run(const char* name) {
  auto tiled_mma = make_tiled_mma(Atom{});
  auto mma_tiler = make_shape(Int<M>{}, Int<N>{}, Int<K>{});
  // per-CTA shapes of the pair's tile (CuTe: partition_shape_A/B of the 2SM TiledMMA)
  auto shA = partition_shape_A(tiled_mma, make_shape(size<0>(mma_tiler), size<2>(mma_tiler)));
  auto shB = partition_shape_B(tiled_mma, make_shape(size<1>(mma_tiler), size<2>(mma_tiler)));
  auto sA_layout = UMMA::tile_to_mma_shape(SmemAtomA{}, shA);
  auto sB_layout = UMMA::tile_to_mma_shape(SmemAtomB{}, shB);
  // a fake smem pointer at address 0 (host run: the start field is then the offset)
  using TA = typename Atom::ValTypeA; using TB = typename Atom::ValTypeB;
  Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<TA*>(0)), sA_layout);
  Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<TB*>(0)), sB_layout);
  auto thr = tiled_mma.get_slice(0);
  Tensor tA = thr.make_fragment_A(sA);
  Tensor tB = thr.make_fragment_B(sB);
  printf("%s A_cta_rows=%d B_cta_rows=%d kblocks=%d\n", name, int(size<0,0>(shA)), int(size<0,0>(shB)), int(size<2>(tA)));
  for (int k = 0; k < size<2>(tA); ++k) {
    uint64_t a = tA(0, 0, k).desc_; uint64_t b = tB(0, 0, k).desc_;
    printf("  k%d A 0x%016llx B 0x%016llx\n", k, (unsigned long long)a, (unsigned long long)b);
  }
}

int main() {
  using Km = UMMA::Major;
  run<MMA_Atom<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 256, 256, Km::K, Km::K>>,
      UMMA::Layout_K_SW128_Atom<half_t>, UMMA::Layout_K_SW128_Atom<half_t>, 256, 256, 64>("f16_256x256x64_kSW128_kSW128");
  run<MMA_Atom<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 128, 128, Km::K, Km::MN>>,
      UMMA::Layout_K_SW128_Atom<half_t>, UMMA::Layout_MN_SW128_Atom<half_t>, 128, 128, 64>("f16_128x128x64_kSW128_mnSW128");
  run<MMA_Atom<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 256, 128, Km::MN, Km::K>>,
      UMMA::Layout_MN_SW64_Atom<half_t>, UMMA::Layout_K_SW32_Atom<half_t>, 256, 128, 32>("f16_256x128x32_mnSW64_kSW32");
  return 0;
}
