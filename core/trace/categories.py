"""Which kind of work a GPU kernel does, from its name: one table for NVIDIA and AMD.

:data:`RULES` is the single source of truth.  Each rule is a category, the
vendor family it was written for, a case-insensitive regular expression
searched in the kernel's own name, and a real kernel name it must match (the tests
check every example).  Rules are tried in order and the first match wins, so
specific families come before generic ones: attention before GEMM (a fused
attention kernel's own name may carry ``gemm``), the
optimizer before normalisation (``multi_tensor_l2norm`` is gradient clipping).

Rules are matched against the kernel's **own name** (:func:`own_name`), not
the full signature: the function name without its namespace, return type,
template arguments and parameter list.  Template arguments and namespaces name
other things (``vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8…>``
is an elementwise kernel, ``fbgemm_gpu::permute_2D_data_kernel`` is a permute,
not a GEMM).  The exception is a generic launcher whose template argument *is*
the kernel (CUTLASS ``Kernel<cutlass_80_tensorop_…gemm…>``, ck_tile
``kentry<…, FmhaFwdKernel<…>>``): its own name is that argument's.  Itanium-
mangled names (``_ZN2ck…``) are read the same way.

Activity that is not a kernel is classified by its Kineto category first:
``gpu_memcpy``/``gpu_memset`` are ``memory`` and ``cuda_sync`` (stream and
context synchronisation as seen by the GPU) is ``sync``.  Categories are matched
case-insensitively and through :data:`CATEGORY_ALIASES`, the spellings of older
profilers (``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, …).

``docs/traces.md`` prints this table for users.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

#: Kernel categories in display order.  ``sync`` is GPU-side synchronisation, not a kernel.
CATEGORIES: tuple[str, ...] = (
    "gemm",
    "attention",
    "communication",
    "elementwise",
    "norm",
    "optimizer",
    "memory",
    "other",
    "sync",
)

#: Human labels for tables and plots.
LABELS: dict[str, str] = {
    "gemm": "GEMM",
    "attention": "attention",
    "communication": "communication",
    "elementwise": "elementwise/activation",
    "norm": "normalisation",
    "optimizer": "optimizer",
    "memory": "memcpy/memset",
    "other": "other",
    "sync": "GPU sync",
}

#: The three classes of HTA's temporal breakdown each category belongs to.
TEMPORAL_CLASS: dict[str, str] = {
    "communication": "communication",
    "memory": "memory",
    "sync": "other",
    **{c: "compute" for c in ("gemm", "attention", "elementwise", "norm", "optimizer", "other")},
}


class Rule(NamedTuple):
    category: str
    family: str  # vendor/library family the rule was written for
    pattern: str  # searched (re.search, case-insensitive) in the kernel's own name (see own_name)
    example: str  # a real kernel name the rule matches


RULES: tuple[Rule, ...] = (
    # -- memory: copies and fills that run as kernels -------------------------------------
    Rule("memory", "CUDA/HIP runtime", r"^(hip)?mem(cpy|set)\b", "Memcpy DtoD (Device -> Device)"),
    Rule(
        "memory",
        "ROCm (ROCclr blit kernels)",
        r"__amd_rocclr_(copy|fill)",
        "__amd_rocclr_copyBuffer",
    ),
    # -- communication --------------------------------------------------------------------
    Rule(
        "communication",
        "NCCL",
        r"^nccl|\bnccl",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    ),
    Rule("communication", "RCCL", r"rccl|msccl", "rcclGenericKernel<1, false>(ncclDevComm*)"),
    Rule(
        "communication",
        "torch symmetric memory / custom all-reduce",
        r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|cross_device_reduce"
        r"|custom_all_reduce|allreduce_kernel|all_gather_kernel|reduce_scatter_kernel",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
        "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long*, unsigned long, unsigned long)",
    ),
    # -- attention (before GEMM) ----------------------------------------------------------
    Rule(
        "attention",
        "FlashAttention (NVIDIA, PyTorch SDPA flash)",
        r"flash_(fwd|bwd)|flash::|flash_attn|flashattn|flash_fprop|flash_bprop",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4,"
        " false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4,"
        " cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>"
        "(pytorch_flash::Flash_fwd_params)",
    ),
    Rule(
        "attention",
        "cuDNN / TensorRT-LLM fused attention (fmha)",
        r"fmha|fused_attn|sdpa|_mha_|mha_(fwd|bwd)|cudnn_generated_fort_native_sdpa",
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
    ),
    Rule(
        "attention",
        "PyTorch SDPA memory-efficient (cutlass)",
        r"efficient_attention|attentionkernel|attention_kernel|fmha_cutlass",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
        "cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
    ),
    Rule(
        "attention",
        "AMD CK / aiter / Triton attention",
        r"fmhafwd|fmhabwd|\battn_(fwd|bwd)|_attn_(fwd|bwd)|attn_fwd|attn_bwd|paged_attention|attention",
        "attn_fwd",
    ),
    # -- GEMM -----------------------------------------------------------------------------
    Rule(
        "gemm",
        "hipBLASLt / Tensile (AMD)",
        r"^cijk_",
        "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1",
    ),
    Rule(
        "gemm",
        "Composable Kernel (AMD)",
        r"kernel_\w*gemm|devicegemm|gridwisegemm",
        "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm"
        "_bk0mk1_bk0nk1_mn_xdlops_bwd_weightILi6",
    ),
    Rule(
        "gemm",
        "cuBLAS nvjet (Hopper/Blackwell)",
        r"^nvjet",
        "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",
    ),
    Rule(
        "gemm",
        "cuBLAS/cuDNN xmma (sm80/sm90/sm100)",
        r"sm\d+_xmma_gemm|xmma_gemm|sm\d+_xmma_.*gemm",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
        "_execute_segment_k_off_kernel__5x_cublas",
    ),
    Rule(
        "gemm",
        "CUTLASS",
        r"cutlass.*(gemm|tensorop|wgmma|gmma)|cutlass_\d+_.*gemm",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)",
    ),
    Rule(
        "gemm",
        "cuBLAS classic (ampere_/volta_ sgemm/hgemm) and gemv",
        r"(ampere|volta|turing|hopper|maxwell)_\w*gemm|gemv|gemmk|gemmsn|splitkreduce",
        "ampere_sgemm_128x64_nn",
    ),
    Rule(
        "gemm",
        "Triton matmul (TorchInductor templates)",
        r"triton_tem_fused_\w*mm|matmul|_mm_kernel",
        "triton_tem_fused_addmm_0",
    ),
    Rule(
        "gemm",
        "TensorRT-LLM / FlashInfer batched GEMM (Blackwell)",
        r"^bmm_",
        "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b"
        "_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma",
    ),
    Rule(
        "gemm",
        "convolution as implicit GEMM (Composable Kernel, cuDNN scudnn/hcudnn)",
        r"grouped_conv_(fwd|bwd)|conv_(fwd|bwd|wrw)_xdl|implicitgemmconv|_[sh]cudnn_",
        "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm",
    ),
    Rule("gemm", "generic GEMM / implicit-GEMM convolution", r"gemm", "igemm_fwd_gtcx3_nhwc_bf16_bx0"),
    # -- optimizer (before norm: multi_tensor_l2norm is grad clipping) -------------------------
    Rule(
        "optimizer",
        "PyTorch foreach / Apex / TE fused optimizers",
        r"multi_tensor|adam|\bsgd|lamb(?!da)|_foreach_|optimizer|adagrad|lion_",
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float,"
        " float, float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>,"
        " AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float)",
    ),
    # -- normalisation --------------------------------------------------------------------
    Rule(
        "norm",
        "LayerNorm / RMSNorm / BatchNorm (PyTorch, TE, Apex, cuDNN, MIOpen, vLLM)",
        r"norm(?!al)|bn_(fw|bw)|batchnorm|gammabetabackward",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
        "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    ),
    # -- elementwise / activation --------------------------------------------------------
    Rule(
        "elementwise",
        "PyTorch ATen pointwise, reductions, copies, index",
        r"elementwise|reduce_kernel|catarraybatchedcopy|index(select|func|_)|gather|scatter"
        r"|copy_kernel|fill|where_kernel|softmax|dropout",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
        " at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>,"
        " at::detail::Array<char*, 3>)",
    ),
    Rule(
        "elementwise",
        "layout transposes (cuDNN nchwToNhwc, MIOpen transpose_NCHW2CNHW / batched_transpose, cuBLAS)",
        r"transpose|(nchw|nhwc|cnhw|chwn)_?(to|2)_?(nchw|nhwc|cnhw|chwn)",
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
        "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
    ),
    Rule(
        "elementwise",
        "embedding lookups and permutes (FBGEMM, TorchRec)",
        r"embedding_codegen_forward|embedding_bag|embedding_forward|^permute_|_permute_|bounds_check_indices"
        r"|offsets_range",
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int, int const*,"
        " decltype(nullptr) const*, int const*, int const*, int const*, int*, decltype(nullptr)*)",
    ),
    Rule(
        "elementwise",
        "activations, RoPE, casts, fused pointwise (Triton, TE, vLLM, MIOpen)",
        r"gelu|silu|swiglu|geglu|relu|sigmoid|tanh|rotary|rope|quantiz|_quant|dequant|fp8rowwise|cast"
        r"|triton_(poi|red|per)_"
        r"|subtensorop|cross_entropy|softplus",
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*,"
        " c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
    ),
)


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((rule.category, re.compile(rule.pattern, re.IGNORECASE)) for rule in RULES)


#: Kineto event categories of GPU-timeline activity and how they classify without a name rule.
ACTIVITY_CATEGORIES: dict[str, str | None] = {
    "kernel": None,  # by name, through RULES
    "gpu_memcpy": "memory",
    "gpu_memset": "memory",
    "cuda_sync": "sync",
}

#: Event categories as older profilers spelled them (lower-cased), to the current Kineto name.
#: Kineto wrote these capitalised names until its June 2021 "Refactor trace activities" change
#: (pytorch/kineto 6f9c0eef), and the TensorBoard profiler plugin reads them the same way.
#: A category is matched case-insensitively: lower-cased, then looked up here.
CATEGORY_ALIASES: dict[str, str] = {
    "kernel": "kernel",  # "Kernel"
    "memcpy": "gpu_memcpy",  # "Memcpy"
    "memset": "gpu_memset",  # "Memset"
    "runtime": "cuda_runtime",  # "Runtime"
    "operator": "cpu_op",  # "Operator"
    "user": "gpu_user_annotation",  # "User": annotations on a GPU stream ("stream N user")
}


def canonical_category(cat: object) -> str | None:
    """The current Kineto spelling of an event category (``"Kernel"`` -> ``"kernel"``), or None if not a string."""
    if not isinstance(cat, str):
        return None
    lowered = cat.lower()
    return CATEGORY_ALIASES.get(lowered, lowered)


#: A kernel name is read (own name, collective, short name) from its first this many characters;
#: the longest in the test traces has 5123 (a Composable Kernel template).
MAX_NAME_CHARS = 16384
#: The rules are searched in the first this many characters of the own name (the longest real
#: one in the test traces has 637): a regular expression's cost grows with the text it searches.
MAX_OWN_CHARS = 1024
#: Generic launchers unwrapped at most this many times (``Kernel<Kernel<…>>``).
MAX_UNWRAP = 8


def classify(name: str, cat: str = "kernel") -> str:
    """The category of one GPU activity: Kineto category first, then the first matching rule."""
    fixed = ACTIVITY_CATEGORIES.get(cat)
    if fixed is None and cat not in ACTIVITY_CATEGORIES:
        fixed = ACTIVITY_CATEGORIES.get(canonical_category(cat) or "")
    if fixed is not None:
        return fixed
    own = own_name(name)[:MAX_OWN_CHARS]
    for category, pattern in _compiled():
        if pattern.search(own):
            return category
    return "other"


#: Generic launchers whose first (type) template argument is the kernel they run.
WRAPPERS = frozenset({"Kernel", "Kernel2", "kentry", "device_kernel"})

_MEMORY_NAME = re.compile(r"^(hip)?mem(cpy|set)\b", re.IGNORECASE)
_LITERAL_ARG = re.compile(r"^[-\d.(]|^(true|false|nullptr)\b")
_DIGITS = re.compile(r"\d{1,9}")


def own_name(name: str) -> str:
    """A kernel's own name: no namespace, return type, template arguments or parameters.

    ``void fbgemm_gpu::permute_2D_data_kernel<false, int>(int, …)`` → ``permute_2D_data_kernel``;
    ``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>(…)`` → ``cutlass_80_tensorop_s1688gemm_…``
    (a launcher's kernel is its template argument); mangled ``_ZN2ck…6kernel_gemm_xdlINS_…`` →
    ``kernel_gemm_xdl``.  Names that are not C++ signatures (``Cijk_…``, ``Memcpy DtoD (…)``) are
    returned unchanged.  Only the first :data:`MAX_NAME_CHARS` characters are read.
    """
    return _own_name(name[:MAX_NAME_CHARS])


@lru_cache(maxsize=65536)
def _own_name(name: str) -> str:
    text = name.strip()
    for _ in range(MAX_UNWRAP):
        if _MEMORY_NAME.match(text):
            return text
        if text.startswith("_Z"):
            return _mangled_own_name(text) or text
        own, template = _split_signature(text.replace("(anonymous namespace)::", ""))
        inner = _first_type_argument(template) if own in WRAPPERS and template else ""
        if not inner:
            return own or text
        text = inner.strip()  # a launcher's own name is its kernel's
    return text


def _split_signature(text: str) -> tuple[str, str]:
    """(unqualified function name, its template argument text) of a demangled signature.

    Inside template arguments a ``>`` within parentheses is a comparison, not a closing
    bracket (``std::enable_if<((8)>(0)), void>::type vllm::kernel<…>(…)``).
    """
    depth = 0
    parens = 0  # open parentheses inside the template arguments
    bare: list[str] = []
    blank = True  # ``bare`` holds only white space so far
    templates: dict[int, str] = {}
    opened = 0
    for index, char in enumerate(text):
        if depth and char in "()":
            parens += 1 if char == "(" else -1 if parens else 0
        elif char == "<":
            if depth == 0:
                opened = index
            depth += 1
        elif char == ">" and depth and not parens:
            depth -= 1
            if depth == 0:
                templates[len(bare)] = text[opened + 1 : index]
        elif depth == 0:
            if char == "(" and not blank:
                break
            bare.append(char)
            blank = blank and char.isspace()
    qualified = "".join(bare).strip()
    end = len("".join(bare).rstrip())
    if " " in qualified:
        qualified = qualified.rsplit(" ", 1)[1]
    own = qualified.rsplit("::", 1)[-1]
    return own, templates.get(end, "")


def _first_type_argument(template: str) -> str:
    """The first template argument that is a type (not a number or boolean)."""
    depth = 0
    start = 0
    for index, char in enumerate(template + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            argument = template[start:index].strip()
            if argument and not _LITERAL_ARG.match(argument):
                return argument
            start = index + 1
    return ""


_SUBSTITUTIONS = ("St", "Sa", "Sb", "Ss", "Si", "So", "Sd")


def _mangled_components(text: str, index: int) -> tuple[list[str], int]:
    """The identifiers of an Itanium nested name starting at ``index``, and where they stop."""
    names: list[str] = []
    while index < len(text):
        char = text[index]
        if char.isdigit():
            digits = _DIGITS.match(text, index)
            if digits is None:  # a non-ASCII digit
                break
            index = digits.end()
            length = int(digits.group())
            names.append(text[index : index + length])
            index += length
        elif text.startswith(_SUBSTITUTIONS, index):
            index += 2
        elif char == "S":
            close = text.find("_", index)
            if close < 0:
                break
            index = close + 1
        elif char in "KVr":
            index += 1
        else:
            break
    return names, index


def _mangled_own_name(text: str) -> str:
    """The own name of an Itanium-mangled kernel (``_ZN2ck…``), possibly truncated by the profiler."""
    index = 2
    nested = text.startswith("_ZN")
    if nested:
        index += 1
    names, index = _mangled_components(text, index)
    if not names:
        return ""
    own = names[-1]
    if own in WRAPPERS and text.startswith("I", index):
        index += 1
        while text.startswith("L", index):  # literal template arguments: L<type><value>E
            close = text.find("E", index)
            if close < 0:
                return own
            index = close + 1
        if text.startswith("N", index):
            index += 1
        inner, _ = _mangled_components(text, index)
        if inner:
            return inner[-1]
    return own


_COLLECTIVES = (
    ("all-reduce", re.compile(r"all_?reduce", re.IGNORECASE)),
    ("reduce-scatter", re.compile(r"reduce_?scatter", re.IGNORECASE)),
    ("all-gather", re.compile(r"all_?gather", re.IGNORECASE)),
    ("all-to-all", re.compile(r"all_?to_?all", re.IGNORECASE)),
    ("send/recv", re.compile(r"send|recv", re.IGNORECASE)),
    ("broadcast", re.compile(r"broadcast", re.IGNORECASE)),
    ("reduce", re.compile(r"_reduce_|reduce\(", re.IGNORECASE)),
)


def collective_kind(name: str) -> str:
    """Which collective a communication kernel performs, from its name ("other" when unknown).

    RCCL and recent NCCL may name every collective ``ncclDevKernel_Generic``:
    those are reported as ``generic``.  Only the first :data:`MAX_NAME_CHARS` characters are read.
    """
    name = name[:MAX_NAME_CHARS]
    for kind, pattern in _COLLECTIVES:
        if pattern.search(name):
            return kind
    if "generic" in name.lower():
        return "generic"
    return "other"


def rules_markdown() -> str:
    """The rule table as Markdown (``docs/traces.md`` holds this text; a test keeps them equal)."""
    lines = [
        "| # | category | family | pattern (case-insensitive, searched in the own name) | example |",
        "|---:|---|---|---|---|",
    ]
    for number, rule in enumerate(RULES, start=1):
        example = rule.example if len(rule.example) < 60 else rule.example[:57] + "…"
        pattern = rule.pattern.replace("|", "\\|")
        example = example.replace("|", "\\|")
        lines.append(f"| {number} | {rule.category} | {rule.family} | `{pattern}` | `{example}` |")
    return "\n".join(lines) + "\n"
