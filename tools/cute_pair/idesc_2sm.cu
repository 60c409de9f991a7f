#include <cstdio>
#include <cstdint>
#include <cute/atom/mma_traits_sm100.hpp>
using namespace cute;
template <class Op> void show(const char* name) {
  MMA_Traits<Op> t{};
  uint32_t v = 0; static_assert(sizeof(t.idesc_) == 4, "");
  memcpy(&v, &t.idesc_, 4);
  printf("%s 0x%08x\n", name, v);
}
int main() {
  using K = UMMA::Major;
  show<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 256, 256, K::K, K::K>>("f16_f32_256x256_kk");
  show<SM100_MMA_F16BF16_2x1SM_SS<bfloat16_t, bfloat16_t, float, 256, 128, K::K, K::K>>("bf16_f32_256x128_kk");
  show<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 128, 128, K::K, K::MN>>("f16_f32_128x128_kmn");
  show<SM100_MMA_F16BF16_2x1SM_SS<half_t, half_t, float, 128, 128, K::K, K::K>>("f16_f32_128x128_kk");
  show<SM100_MMA_F16BF16_2x1SM_SS<bfloat16_t, bfloat16_t, float, 256, 128, K::MN, K::K>>("bf16_f32_256x128_mnk");
  show<SM100_MMA_TF32_2x1SM_SS<tfloat32_t, tfloat32_t, float, 256, 256, K::K, K::K>>("tf32_f32_256x256_kk");
  show<SM100_MMA_F8F6F4_2x1SM_SS<float_e4m3_t, float_e4m3_t, float, 256, 128, K::K, K::K>>("e4m3_f32_256x128_kk");
  show<SM100_MMA_S8_2x1SM_SS<int8_t, int8_t, int32_t, 256, 128, K::K, K::K>>("s8_s32_256x128_kk");
  return 0;
}
