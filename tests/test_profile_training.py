"""tools/profile_training.py's arithmetic on the CPU: kernel names sorted into categories (names in the forms the
libraries give their kernels: ptxgen's, cuBLAS's nvjet and xmma kernels, torch._grouped_mm's CUTLASS kernel, ATen's
element-wise, reduction, fill and copy kernels, Inductor's Triton kernels; written here, not captured from a profile), the union of overlapping intervals, the per-step summary and table; its exit codes
without a GPU. The GPU run itself is tools/gpu_run.sh's training step."""

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "profile_training.py"


@pytest.fixture(scope="module")
def pt():
    spec = importlib.util.spec_from_file_location("profile_training", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NAMES = {
    "ptxgen_sm90a_bf16_f32_obf16_128x256x64_s4_a_k_sw128_ok_b_k_sw128_ok_persistent_g16_tmastore_fbias_col_bf16_act_gelu_tanh_aux":
        "ptxgen GEMM",
    "nvjet_tst_256x128_64x4_2x1_v_bz_coopA_bias_TNT": "cuBLAS GEMM",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas":
        "cuBLAS GEMM",
    "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::kernel::GemmUniversal<"
    "cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int> > > > >(T1::Params)": "cuBLAS GEMM",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "std::array<char*, 2ul> >(int, T2, T3)": "elementwise",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, "
    "float)#1}>, unsigned int, c10::BFloat16, 4, 4> >(T2)": "reduction",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >"
    "(int, T2, T3)": "copy/memset",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(int, T1)":
        "copy/memset",
    "Memset (Device)": "copy/memset",
    "Memcpy DtoD (Device -> Device)": "copy/memset",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)": "reduction",
    "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, unsigned "
    "int>, unsigned int)": "other",
    "void at::native::indexFuncLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true, "
    "at::native::(anonymous namespace)::ReduceAdd>(...)": "other",
    # Inductor's generated Triton kernels (torch.compile): pointwise, reduction, persistent reduction, template
    "triton_poi_fused_mul_silu_slice_3": "elementwise",
    "triton_poi_fused_grouped_gemm_index_5": "elementwise",  # an index copy Inductor fused beside a custom op
    "triton_red_fused__to_copy_sum_7": "reduction",
    "triton_per_fused__softmax_topk_1": "reduction",
    "triton_tem_fused_addmm_0": "other",
}


def test_kernel_names_fall_into_their_categories(pt):
    got = {name: pt.classify(name) for name in NAMES}
    assert got == NAMES
    assert set(NAMES.values()) == set(pt.CATEGORIES)  # every category met by a real name


def test_control_without_the_rules_everything_is_other(pt, monkeypatch):
    monkeypatch.setattr(pt, "_RULES", ())
    assert {pt.classify(n) for n in NAMES} == {"other"}


def test_union_of_overlapping_intervals(pt):
    assert pt.union_us([]) == 0
    assert pt.union_us([(0, 10), (5, 12), (20, 25), (21, 22), (30, 30)]) == 12 + 5
    assert pt.union_us([(20, 25), (0, 10)]) == 15


def test_summary_per_step_and_table(pt):
    gemm, ew, fill = "ptxgen_sm90a_x", "void at::native::vectorized_elementwise_kernel<4, X>", "Memset (Device)"
    # two steps: each a 1000 us GEMM, a 100 us element-wise kernel after a 50 us gap, a 10 us memset overlapping it
    events = [(gemm, 0, 1000), (ew, 1050, 1150), (fill, 1100, 1110),
              (gemm, 2000, 3000), (ew, 3050, 3150), (fill, 3100, 3110)]
    s = pt.summarize(events, 2)
    assert s["category_ms"]["ptxgen GEMM"] == pytest.approx(1.0)
    assert s["category_ms"]["elementwise"] == pytest.approx(0.1)
    assert s["category_ms"]["copy/memset"] == pytest.approx(0.01)
    assert s["busy_ms"] == pytest.approx(1.1)  # the memset lies inside the element-wise kernel's interval
    assert s["profiled_span_ms"] == pytest.approx(3150 / 2 / 1e3)
    assert s["launches"] == 3 and s["top"][0]["kernel"] == gemm and s["top"][0]["launches"] == 1
    row = {**s, "wall_ms": 1.6, "host_ms": 0.2, "gaps_ms": 1.6 - s["busy_ms"]}
    text = pt.table({"mlp": {"ptxgen": row, "torch": {**row, "wall_ms": 1.5, "gaps_ms": 0.4}}})
    assert "mlp ptx-torch" in text and "+0.100" in text  # wall 1.6 against 1.5


def test_exit_codes_without_a_gpu(pt, tmp_path):
    torch = pytest.importorskip("torch")
    assert pt.main(["--out", str(tmp_path / "o"), "--model", "cnn"]) == 2
    assert pt.main(["--out", str(tmp_path / "o"), "--steps", "0"]) == 2
    if not torch.cuda.is_available():
        assert pt.main(["--out", str(tmp_path / "o")]) == 3
        assert not (tmp_path / "o").exists()
