"""The kernel-category table: every rule's example, one test per vendor family, real names from traces."""

from __future__ import annotations

import pytest

from tprimat.trace.categories import CATEGORIES, RULES, classify, collective_kind, own_name
from tprimat.trace.reader import read_trace


@pytest.mark.parametrize("rule", RULES, ids=[f"{r.category}:{r.family}" for r in RULES])
def test_every_rule_example_is_classified_as_its_category(rule):
    assert classify(rule.example) == rule.category
    assert rule.category in CATEGORIES


# (vendor family, kernel name as it appears in real traces, expected category)
FAMILIES = [
    # GEMM
    ("cuBLAS classic", "ampere_sgemm_128x64_nn", "gemm"),
    (
        "cuBLAS sm90 xmma",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
        "_execute_segment_k_off_kernel__5x_cublas",
        "gemm",
    ),
    ("cuBLAS nvjet", "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN", "gemm"),
    (
        "CUTLASS",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
        "(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
        "gemm",
    ),
    ("hipBLASLt", "Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN_1LDSB0_APM1", "gemm"),
    ("hipBLASLt post-GSU", "Cijk_B_PostGSU2", "gemm"),
    (
        "Composable Kernel",
        "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle"
        "_v3INS_28GridwiseGemm_xdl_cshuffle_v3INS_13t",
        "gemm",
    ),
    ("MIOpen implicit GEMM", "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2", "gemm"),
    ("Triton matmul", "triton_tem_fused_mm_3", "gemm"),
    ("Triton matmul kernel", "matmul_kernel_persistent", "gemm"),
    # attention
    (
        "FlashAttention",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128,"
        " 4, false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)",
        "attention",
    ),
    (
        "FlashAttention 2",
        "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>(Flash_bwd_params)",
        "attention",
    ),
    (
        "cuDNN fmha",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
        "attention",
    ),
    (
        "TRT-LLM fmha (Blackwell)",
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
        "attention",
    ),
    (
        "SDPA memory-efficient",
        "fmha_cutlassB_f32_aligned_64x64_k65536_dropout_sm80"
        "(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, float, true, true, false,"
        " 64, 64, 65536, false>::Params)",
        "attention",
    ),
    ("AMD Triton attention", "attn_fwd", "attention"),
    ("CK tile fmha", "_ZN7ck_tile6kentryILi2ENS_13FmhaFwdKernelINS_28BlockFmhaPipelineQRKSVSAsync", "attention"),
    ("aiter", "_ZN5aiter22fmha_fwd_hd128_bf16_causal_kernelEv", "attention"),
    # communication
    ("NCCL", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("NCCL (older)", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication"),
    ("RCCL", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("RCCL named", "rcclGenericKernel<1, false>(ncclDevComm*)", "communication"),
    # elementwise, norm, optimizer
    (
        "ATen pointwise",
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()()"
        " const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int)",
        "elementwise",
    ),
    ("Triton pointwise", "triton_poi_fused_add_mul_0", "elementwise"),
    ("MIOpen pointwise", "SubTensorOpWithScalar1d", "elementwise"),
    (
        "ATen LayerNorm",
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*)",
        "norm",
    ),
    ("vLLM RMSNorm", "void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*)", "norm"),
    (
        "cuDNN BatchNorm",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct)",
        "norm",
    ),
    (
        "ATen foreach Adam",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
        "<float, 4, (at::native::ADAM_MODE)1, false> >(int)",
        "optimizer",
    ),
    (
        "Apex/TE grad-norm",
        "void multi_tensor_apply_kernel<TensorListMetadata<1>, L2NormFunctor<float, float> >(long)",
        "optimizer",
    ),
    # memory
    ("CUDA memcpy kernel-named", "Memcpy DtoD (Device -> Device)", "memory"),
    ("ROCm blit copy", "__amd_rocclr_copyBuffer", "memory"),
    ("ROCm blit fill", "__amd_rocclr_fillBufferAligned", "memory"),
]


@pytest.mark.parametrize("family,name,expected", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_vendor_family(family, name, expected):
    assert classify(name) == expected


def test_lambda_in_template_names_is_not_the_lamb_optimizer():
    name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda()#2}::operator()() const>(int)"
    )
    assert classify(name) == "elementwise"


def test_random_normal_kernel_is_not_normalisation():
    name = (
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4,"
        " at::native::templates::cuda::normal_and_transform<float, float>(int)"
    )
    assert classify(name) == "elementwise"


def test_a_comparison_inside_template_arguments_does_not_end_them():
    # vLLM's kernel in TraceLens's B200 trace (fixtures/traces/tracelens/b200_eager_trace.json.gz):
    # the ">" of "(8)>(0)" is inside parentheses; the kernel is the name after the return type.
    name = (
        "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
        "c10::BFloat16 const*, float, int, int)"
    )
    assert own_name(name) == "fused_add_rms_norm_kernel"
    assert classify(name) == "norm"


def test_activity_category_wins_over_the_name():
    assert classify("anything", "gpu_memcpy") == "memory"
    assert classify("anything", "gpu_memset") == "memory"
    assert classify("Context Sync", "cuda_sync") == "sync"
    assert classify("some_unknown_kernel_name") == "other"


@pytest.mark.parametrize(
    "name,kind",
    [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all-reduce"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)", "reduce-scatter"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all-gather"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "send/recv"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "broadcast"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "generic"),
    ],
)
def test_collective_kind(name, kind):
    assert collective_kind(name) == kind


@pytest.mark.parametrize(
    "name,dominant",
    [
        # the largest kernel-time category of each real trace, by vendor
        ("tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", {"gemm", "elementwise", "attention"}),
        ("tracelens/mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", {"gemm", "elementwise", "attention"}),
        ("tracelens/mi300_resnet_act_checkpoint.json.gz", {"communication"}),
        ("tracelens/evals_mi300x_rocprofiler-sdk_gemm_01_compute_few_tiles.json", {"gemm"}),
    ],
)
def test_real_traces_leave_little_unclassified(fixtures, name, dominant):
    trace = read_trace(fixtures / "traces" / name)
    time = {}
    from tprimat.trace.reader import ACTIVITY_CODES

    for i in range(len(trace.ts)):
        category = classify(trace.names[trace.name_id[i]], ACTIVITY_CODES[trace.code[i]])
        time[category] = time.get(category, 0.0) + trace.dur[i]
    total = sum(time.values())
    assert time.get("other", 0.0) < 0.2 * total, time
    top = max(time, key=time.get)
    assert top in dominant, time


def test_docs_print_the_current_rule_table():
    from pathlib import Path

    from tprimat.trace.categories import rules_markdown

    docs = (Path(__file__).resolve().parents[3] / "docs" / "traces.md").read_text()
    begin, end = "<!-- rules:begin -->\n", "<!-- rules:end -->"
    table = docs[docs.index(begin) + len(begin) : docs.index(end)]
    assert table == rules_markdown(), "docs/traces.md is stale: paste tprimat.trace.categories.rules_markdown()"


def _kernel_time_by_name(path):
    from tprimat.trace.reader import ACTIVITY_CODES

    trace = read_trace(path)
    time: dict[str, float] = {}
    for i in range(len(trace.ts)):
        if ACTIVITY_CODES[trace.code[i]] == "kernel":
            name = trace.names[trace.name_id[i]]
            time[name] = time.get(name, 0.0) + trace.dur[i]
    return time


def test_fbgemm_in_a_namespace_or_template_argument_is_not_gemm(fixtures):
    # HTA's sampled recommendation-model trace: matched on the whole signature, 57% of its
    # "GEMM" time was FBGEMM permutes, FP8 quantize kernels and elementwise kernels whose
    # template argument names fbgemm_gpu::.
    time = _kernel_time_by_name(fixtures / "traces/hta/trace_filter_sampled_rank-0.json.gz")
    gemm = {name: t for name, t in time.items() if classify(name) == "gemm"}
    assert gemm and not [name for name in gemm if "fbgemm" in name]
    import re

    blas = re.compile(r"gemm|gemv|splitkreduce", re.IGNORECASE)  # cuBLAS GEMM, GEMV and split-K reduction
    assert all(blas.search(own_name(name)) for name in gemm), sorted(map(own_name, gemm))
    by_own = {own_name(name): classify(name) for name in time}
    assert by_own["cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1"] == "gemm"  # CUTLASS Kernel<op>
    assert by_own["permute_2D_data_kernel"] == "elementwise"
    assert by_own["_compute_FP8_quantize_cuda_kernel"] == "elementwise"
    assert by_own["_FP8rowwise_to_float_cuda_kernel"] == "elementwise"
    assert by_own["split_embedding_codegen_forward_unweighted_kernel"] == "elementwise"
    hfp8 = [name for name in time if name.startswith("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::")]
    assert hfp8 and {classify(name) for name in hfp8} == {"elementwise"}


def test_the_same_layout_transpose_lands_in_one_category_on_both_vendors(fixtures):
    nvidia = _kernel_time_by_name(fixtures / "traces/hta/nccl_parser_config_nccl_data.json.gz")
    amd = _kernel_time_by_name(fixtures / "traces/tracelens/mi300_resnet_act_checkpoint.json.gz")
    cudnn = [n for n in nvidia if "nchwToNhwc" in n or "nhwcToNchw" in n]
    miopen = [n for n in amd if "transpose" in n.lower()]
    assert len(cudnn) >= 2 and len(miopen) >= 2
    assert {classify(n) for n in cudnn} == {classify(n) for n in miopen} == {"elementwise"}


@pytest.mark.parametrize(
    "name,own",
    [
        (
            "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)",
            "permute_2D_lengths_kernel",
        ),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)",
            "vectorized_layer_norm_kernel",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
            "(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
            "cutlass_80_simt_sgemm_128x32_8x5_nn_align1",
        ),
        ("_ZN7ck_tile6kentryILi2ENS_13FmhaFwdKernelINS_28BlockFmhaPipelineQRKSVSAsync", "FmhaFwdKernel"),
        (
            "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm",
            "kernel_batched_gemm_xdlops_bwd_weight",
        ),
        (
            "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock",
            "ImplicitGemmConvolution",
        ),
        (
            "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1",
            "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1",
        ),
        ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),
        ("_ZN2ck16tensor_op", "tensor_op"),  # truncated by the profiler: what is there
    ],
)
def test_own_name(name, own):
    assert own_name(name) == own
