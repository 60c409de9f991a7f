// Our harness around DeepGEMM's SM90 FP8 1D2D kernel (deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh), for a reference
// measurement only (issue 17; tools/ref/bench_deepgemm.py builds and drives it). DeepGEMM's and CUTLASS's headers stay
// outside this repository: the include paths are given at build time (-I<DeepGEMM>/deep_gemm/include
// -I<cutlass>/include). Nothing of ptxgen uses this file.
//
// One shared object per configuration: the build defines
//   DG_N, DG_K          the compiled N and K (DeepGEMM's fp8_gemm_nt default compiled_dims="nk"; M stays a runtime value)
//   DG_BM, DG_BN        BLOCK_M, BLOCK_N (BLOCK_K is 128, fixed by the kernel)
//   DG_STAGES           kNumStages (as DeepGEMM's SM90ArchSpec::get_pipeline_config computes it)
//   DG_SWZ_D            kSwizzleDMode (get_swizzle_mode(BLOCK_N * 2 bytes))
//   DG_CM, DG_CN        cluster_m, cluster_n (multicast on A when DG_CN > 1, as DeepGEMM's generate_impl)
//   DG_NUM_SMS          kNumSMs (the persistent grid; DeepGEMM: the device's multiProcessorCount)
//   DG_SMEM             the dynamic shared memory DeepGEMM asks for (PipelineConfig::smem_size)
// The host side mirrors DeepGEMM's csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp + runtime_utils.hpp (make_tma_*_desc)
// + jit/handle.hpp (construct_launch_config, PDL off as DeviceRuntime's default): written here, not copied.
//
// C ABI: dg_config(int out[16]) -> the compiled configuration and the kernel's attributes; dg_prepare(a, b, d, sfa,
// sfb, m) -> 0 or an error (tensor maps built, smem attribute set; dg_error() says why); dg_launch(stream) -> a
// cudaError_t. The maps are kept in this object between dg_prepare and dg_launch (one problem at a time).

#include <cstdint>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>

#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>

#ifndef DG_N
#error "build with -DDG_N=... -DDG_K=... -DDG_BM=... -DDG_BN=... -DDG_STAGES=... -DDG_SWZ_D=... -DDG_CM=... -DDG_CN=... -DDG_NUM_SMS=... -DDG_SMEM=..."
#endif

namespace {

constexpr uint32_t kBlockK = 128;
constexpr uint32_t kNumTMAThreads = 128;
constexpr uint32_t kNumMathThreads = DG_BM <= 64 ? 128 : 256;  // SM90ArchSpec::get_launch_config
constexpr uint32_t kClusterSize = DG_CM * DG_CN;
constexpr bool kMulticastOnA = DG_CN > 1;
constexpr uint32_t kSwizzleAB = 128;  // get_swizzle_mode(BLOCK_K * 1 byte) for K-major FP8

static_assert(kClusterSize <= 2, "DeepGEMM's SM90 scheduler: cluster of at most 2");
static_assert(DG_SMEM <= 232448, "SM90ArchSpec::smem_capacity");

auto kernel = &deep_gemm::sm90_fp8_gemm_1d2d_impl<
    cute::UMMA::Major::K,                  // kMajorSFB: SFB (N/128 x K/128) K-major, contiguous
    0, DG_N, DG_K,                         // SHAPE_M (runtime), SHAPE_N, SHAPE_K
    1,                                     // kNumGroups
    DG_BM, DG_BN, kBlockK,
    kSwizzleAB, kSwizzleAB, DG_SWZ_D,
    DG_STAGES,
    kNumTMAThreads, kNumMathThreads,
    kClusterSize, kMulticastOnA,
    DG_NUM_SMS, deep_gemm::GemmType::Normal,
    cutlass::bfloat16_t,
    deep_gemm::epilogue::transform::EpilogueIdentity>;

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

struct State {
    CUtensorMap a, b, d, sfa;
    float* sfb = nullptr;
    uint32_t m = 0;
    bool ready = false;
} g;

char g_err[512] = "";

CUtensorMapSwizzle swizzle_of(uint32_t mode) {
    switch (mode) {
        case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
        case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
        case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
        default: return CU_TENSOR_MAP_SWIZZLE_NONE;  // 0 and 16: no swizzle
    }
}

// DeepGEMM's make_tma_2d_desc: a 2-D map, inner dim first; with a swizzle the inner box is swizzle_bytes / elem_bytes;
// L2 promotion 256B, OOB fill none.
int make_2d(EncodeTiled enc, CUtensorMap* map, CUtensorMapDataType dtype, uint32_t elem_bytes, void* ptr,
            uint64_t inner, uint64_t outer, uint32_t box_inner, uint32_t box_outer, uint64_t outer_stride_elems,
            uint32_t swizzle, const char* what) {
    if (swizzle != 0) box_inner = swizzle / elem_bytes;
    const cuuint64_t dims[2] = {inner, outer};
    const cuuint64_t strides[1] = {outer_stride_elems * elem_bytes};
    const cuuint32_t box[2] = {box_inner, box_outer};
    const cuuint32_t estr[2] = {1, 1};
    CUresult r = enc(map, dtype, 2, ptr, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_of(swizzle),
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        snprintf(g_err, sizeof g_err, "cuTensorMapEncodeTiled(%s) = %d (dims %llu x %llu, box %u x %u, swizzle %u)",
                 what, int(r), (unsigned long long)inner, (unsigned long long)outer, box_inner, box_outer, swizzle);
        return 1;
    }
    return 0;
}

}  // namespace

extern "C" {

const char* dg_error() { return g_err; }

// out: N, K, BM, BN, stages, swz_d, cluster_m, cluster_n, num_sms, smem, threads, num_regs, local_bytes,
// static_smem, max_threads, ptx_version
int dg_config(int* out) {
    cudaFuncAttributes fa{};
    cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
    int vals[16] = {DG_N, DG_K, DG_BM, DG_BN, DG_STAGES, DG_SWZ_D, DG_CM, DG_CN, DG_NUM_SMS, DG_SMEM,
                    int(kNumTMAThreads + kNumMathThreads), fa.numRegs, int(fa.localSizeBytes),
                    int(fa.sharedSizeBytes), fa.maxThreadsPerBlock, fa.ptxVersion};
    for (int i = 0; i < 16; ++i) out[i] = vals[i];
    if (e != cudaSuccess) snprintf(g_err, sizeof g_err, "cudaFuncGetAttributes: %s", cudaGetErrorString(e));
    return int(e);
}

// a: M x K e4m3 row-major; b: N x K e4m3 row-major; d: M x N bf16 row-major; sfa: f32, MN-major, TMA-aligned
// (element (row, kb) at kb * align(M, 4) + row: DeepGEMM's get_mn_major_tma_aligned_tensor); sfb: f32 N/128 x K/128
// row-major (K-major).
int dg_prepare(void* a, void* b, void* d, void* sfa, void* sfb, int m) {
    g.ready = false;
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (sms != DG_NUM_SMS) {
        snprintf(g_err, sizeof g_err, "compiled for %d SMs, the device has %d", DG_NUM_SMS, sms);
        return 2;
    }
    // DeepGEMM resolves the driver's cuTensorMapEncodeTiled lazily (lazy_cuTensorMapEncodeTiled); so do we, through
    // the runtime (no libcuda to link against on the build machine)
    static EncodeTiled enc = nullptr;
    if (enc == nullptr) {
        cudaDriverEntryPointQueryResult q;
        void* fn = nullptr;
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == nullptr) {
            snprintf(g_err, sizeof g_err, "cuTensorMapEncodeTiled entry point: %s / %d", cudaGetErrorString(e), int(q));
            return 3;
        }
        enc = reinterpret_cast<EncodeTiled>(fn);
    }
    const uint64_t M = uint64_t(m), N = DG_N, K = DG_K;
    const uint64_t m_aligned = (M + 3) / 4 * 4;  // get_tma_aligned_size(m, 4 bytes): 16-byte alignment
    const uint64_t k_scales = (K + kBlockK - 1) / kBlockK;
    int bad = 0;
    // make_tma_a_desc / make_tma_b_desc (K-major): gmem {K, MN}, smem {BLOCK_K, load_block}, swizzle 128B
    bad |= make_2d(enc, &g.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a, K, M, kBlockK, DG_BM, K, kSwizzleAB, "A");
    bad |= make_2d(enc, &g.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, b, K, N, kBlockK, DG_BN, K, kSwizzleAB, "B");
    // make_tma_cd_desc: gmem {N, M}, smem {store_block_n, store_block_m = BLOCK_M}, swizzle_cd_mode
    bad |= make_2d(enc, &g.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, d, N, M, DG_BN, DG_BM, N, DG_SWZ_D, "D");
    // make_tma_sf_desc(MN, sfa, m, k, BLOCK_M, BLOCK_K): gmem {align(M, 4), K/128}, smem {BLOCK_M, 1}, no swizzle
    bad |= make_2d(enc, &g.sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, sfa, m_aligned, k_scales, DG_BM, 1, m_aligned, 0,
                   "SFA");
    if (bad) return 4;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, DG_SMEM);
    if (e != cudaSuccess) {
        snprintf(g_err, sizeof g_err, "cudaFuncSetAttribute(smem %d): %s", DG_SMEM, cudaGetErrorString(e));
        return 5;
    }
    g.sfb = static_cast<float*>(sfb);
    g.m = uint32_t(m);
    g.ready = true;
    return 0;
}

// One launch on `stream` (a cudaStream_t, e.g. torch.cuda.current_stream().cuda_stream): grid = kNumSMs persistent
// CTAs, block = TMA + math threads, cluster (cluster_m * cluster_n, 1, 1), no PDL (DeepGEMM's default).
int dg_launch(void* stream) {
    if (!g.ready) {
        snprintf(g_err, sizeof g_err, "dg_launch before a successful dg_prepare");
        return int(cudaErrorInvalidValue);
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(DG_NUM_SMS, 1, 1);
    cfg.blockDim = dim3(kNumTMAThreads + kNumMathThreads, 1, 1);
    cfg.dynamicSmemBytes = DG_SMEM;
    cfg.stream = static_cast<cudaStream_t>(stream);
    cudaLaunchAttribute attrs[1];
    cfg.numAttrs = 0;
    cfg.attrs = attrs;
    if (kClusterSize > 1) {
        attrs[0].id = cudaLaunchAttributeClusterDimension;
        attrs[0].val.clusterDim.x = kClusterSize;
        attrs[0].val.clusterDim.y = 1;
        attrs[0].val.clusterDim.z = 1;
        cfg.numAttrs = 1;
    }
    int* grouped_layout = nullptr;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, g.sfb, grouped_layout, g.m, uint32_t(DG_N), uint32_t(DG_K),
                                       g.a, g.b, g.d, g.sfa);
    if (e != cudaSuccess) snprintf(g_err, sizeof g_err, "cudaLaunchKernelEx: %s", cudaGetErrorString(e));
    return int(e);
}

}  // extern "C"
