"""The ATen vocabulary: every operator target the raise and fuse passes name, named once.

A target is the string an `aten.call` op carries (`irfuse.targets`): `namespace::name.overload`.
Names follow the string: `aten::mul.Tensor` is `MUL_TENSOR`, the `default` overload adds nothing
(`aten::rsqrt.default` is `RSQRT`), a trailing `_` (in place) reads `_INPLACE`, other namespaces
prefix theirs (`IRFUSE_`, `VLLM_`, `C10D_`, `PRIMS_`). Below the names: the sets of spellings
several passes share, and the view-op sets, each saying why it holds what it holds.
"""

from __future__ import annotations

# --- ATen operators (`torch.ops.aten`) ----------------------------------------------------

ABS = "aten::abs.default"
ADDMM = "aten::addmm.default"
ADD_SCALAR = "aten::add.Scalar"
ADD_TENSOR = "aten::add.Tensor"
ALIAS = "aten::alias.default"
AMAX = "aten::amax.default"
ARANGE = "aten::arange.default"
ARANGE_START = "aten::arange.start"
ARANGE_START_STEP = "aten::arange.start_step"
AS_STRIDED = "aten::as_strided.default"
AS_STRIDED_SCATTER = "aten::as_strided_scatter.default"
BITWISE_LEFT_SHIFT_TENSOR = "aten::bitwise_left_shift.Tensor"
BITWISE_LEFT_SHIFT_TENSOR_SCALAR = "aten::bitwise_left_shift.Tensor_Scalar"
BITWISE_NOT = "aten::bitwise_not.default"
BITWISE_OR_TENSOR = "aten::bitwise_or.Tensor"
BITWISE_RIGHT_SHIFT_TENSOR = "aten::bitwise_right_shift.Tensor"
BITWISE_RIGHT_SHIFT_TENSOR_SCALAR = "aten::bitwise_right_shift.Tensor_Scalar"
BMM = "aten::bmm.default"
CAT = "aten::cat.default"
CEIL = "aten::ceil.default"
CLAMP = "aten::clamp.default"
CLAMP_MAX = "aten::clamp_max.default"
CLAMP_MAX_TENSOR = "aten::clamp_max.Tensor"
CLAMP_MIN = "aten::clamp_min.default"
CLAMP_MIN_TENSOR = "aten::clamp_min.Tensor"
CLAMP_TENSOR = "aten::clamp.Tensor"
CLIP = "aten::clip.default"
CLONE = "aten::clone.default"
CONSTANT_PAD_ND = "aten::constant_pad_nd.default"
COPY = "aten::copy.default"
COPY_INPLACE = "aten::copy_.default"
COS = "aten::cos.default"
CUMSUM = "aten::cumsum.default"
DETACH = "aten::detach.default"
DIV_SCALAR = "aten::div.Scalar"
DIV_SCALAR_MODE = "aten::div.Scalar_mode"
DIV_TENSOR = "aten::div.Tensor"
DIV_TENSOR_MODE = "aten::div.Tensor_mode"
EMBEDDING = "aten::embedding.default"
EMPTY_LIKE = "aten::empty_like.default"
EMPTY_MEMORY_FORMAT = "aten::empty.memory_format"
EMPTY_STRIDED = "aten::empty_strided.default"
EQ_SCALAR = "aten::eq.Scalar"
EQ_TENSOR = "aten::eq.Tensor"
EXP = "aten::exp.default"
EXP2 = "aten::exp2.default"
EXPAND = "aten::expand.default"
FLATTEN_USING_INTS = "aten::flatten.using_ints"
FLOOR_DIVIDE = "aten::floor_divide.default"
FULL = "aten::full.default"
FULL_LIKE = "aten::full_like.default"
FUSED_RMS_NORM = "aten::_fused_rms_norm.default"
GELU = "aten::gelu.default"
GT_TENSOR = "aten::gt.Tensor"
INDEX_COPY = "aten::index_copy.default"
INDEX_PUT = "aten::index_put.default"
INDEX_PUT_HACKED_TWIN = "aten::index_put.hacked_twin"
INDEX_SELECT = "aten::index_select.default"
INDEX_TENSOR = "aten::index.Tensor"
LIFT_FRESH_COPY = "aten::lift_fresh_copy.default"
LINEAR = "aten::linear.default"
LOG2 = "aten::log2.default"
LOGICAL_AND = "aten::logical_and.default"
LOGICAL_NOT = "aten::logical_not.default"
LOGICAL_OR = "aten::logical_or.default"
LOGICAL_XOR = "aten::logical_xor.default"
LSHIFT_SCALAR = "aten::__lshift__.Scalar"
LT_TENSOR = "aten::lt.Tensor"
MASKED_FILL_SCALAR = "aten::masked_fill.Scalar"
MASKED_FILL_TENSOR = "aten::masked_fill.Tensor"
MATMUL = "aten::matmul.default"
MATRIX_T = "aten::t.default"
MAX = "aten::max.default"
MAXIMUM = "aten::maximum.default"
MAX_DIM = "aten::max.dim"
MEAN_DIM = "aten::mean.dim"
MINIMUM = "aten::minimum.default"
MM = "aten::mm.default"
MUL_SCALAR = "aten::mul.Scalar"
MUL_TENSOR = "aten::mul.Tensor"
NEG = "aten::neg.default"
NEW_EMPTY = "aten::new_empty.default"
NEW_EMPTY_STRIDED = "aten::new_empty_strided.default"
NEW_FULL = "aten::new_full.default"
NEW_ONES = "aten::new_ones.default"
NEW_ZEROS = "aten::new_zeros.default"
ONES = "aten::ones.default"
ONES_LIKE = "aten::ones_like.default"
OR_TENSOR = "aten::__or__.Tensor"
PAD = "aten::pad.default"
PERMUTE = "aten::permute.default"
POW_SCALAR = "aten::pow.Scalar"
POW_TENSOR_SCALAR = "aten::pow.Tensor_Scalar"
RECIPROCAL = "aten::reciprocal.default"
REMAINDER_SCALAR = "aten::remainder.Scalar"
REMAINDER_TENSOR = "aten::remainder.Tensor"
RESHAPE = "aten::reshape.default"
RESHAPE_AS = "aten::reshape_as.default"
RMS_NORM = "aten::rms_norm.default"
RSQRT = "aten::rsqrt.default"
SAFE_SOFTMAX = "aten::_safe_softmax.default"
SCALAR_TENSOR = "aten::scalar_tensor.default"
SCALED_DOT_PRODUCT_ATTENTION = "aten::scaled_dot_product_attention.default"
SCALED_DOT_PRODUCT_ATTENTION_MATH = "aten::_scaled_dot_product_attention_math.default"
SCALED_DOT_PRODUCT_CUDNN_ATTENTION = "aten::_scaled_dot_product_cudnn_attention.default"
SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION = "aten::_scaled_dot_product_efficient_attention.default"
SCALED_DOT_PRODUCT_FLASH_ATTENTION = "aten::_scaled_dot_product_flash_attention.default"
SCALED_DOT_PRODUCT_FLASH_ATTENTION_FOR_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu.default"
SCALED_MM = "aten::_scaled_mm.default"
SELECT_INT = "aten::select.int"
SELECT_SCATTER = "aten::select_scatter.default"
SGN = "aten::sgn.default"
SIGMOID = "aten::sigmoid.default"
SIGN = "aten::sign.default"
SIGNBIT = "aten::signbit.default"
SILU = "aten::silu.default"
SIN = "aten::sin.default"
SLICE_SCATTER = "aten::slice_scatter.default"
SLICE_TENSOR = "aten::slice.Tensor"
SPLIT_TENSOR = "aten::split.Tensor"
SPLIT_WITH_SIZES = "aten::split_with_sizes.default"
SQRT = "aten::sqrt.default"
SQUEEZE = "aten::squeeze.default"
SQUEEZE_DIM = "aten::squeeze.dim"
SQUEEZE_DIMS = "aten::squeeze.dims"
STACK = "aten::stack.default"
SUB_SCALAR = "aten::sub.Scalar"
SUB_TENSOR = "aten::sub.Tensor"
SUM_DIM_INT_LIST = "aten::sum.dim_IntList"
TO_COPY = "aten::_to_copy.default"
TO_DTYPE = "aten::to.dtype"
TRANSPOSE_INT = "aten::transpose.int"
TRIL = "aten::tril.default"
UNBIND_INT = "aten::unbind.int"
UNFLATTEN_INT = "aten::unflatten.int"
UNSAFE_INDEX_PUT = "aten::_unsafe_index_put.default"
UNSAFE_SPLIT_TENSOR = "aten::unsafe_split.Tensor"
UNSAFE_SPLIT_WITH_SIZES = "aten::unsafe_split_with_sizes.default"
UNSAFE_VIEW = "aten::_unsafe_view.default"
UNSQUEEZE = "aten::unsqueeze.default"
VIEW = "aten::view.default"
VIEW_AS_COMPLEX = "aten::view_as_complex.default"
VIEW_AS_REAL = "aten::view_as_real.default"
VIEW_DTYPE = "aten::view.dtype"
WHERE_SCALAR = "aten::where.Scalar"
WHERE_SCALAR_OTHER = "aten::where.ScalarOther"
WHERE_SCALAR_SELF = "aten::where.ScalarSelf"
WHERE_SELF = "aten::where.self"
ZEROS = "aten::zeros.default"
ZEROS_LIKE = "aten::zeros_like.default"

# --- prims --------------------------------------------------------------------------------

PRIMS_CONVERT_ELEMENT_TYPE = "prims::convert_element_type.default"

# --- higher-order operators ---------------------------------------------------------------

AUTO_FUNCTIONALIZED = "hop:auto_functionalized"
AUTO_FUNCTIONALIZED_V2 = "hop:auto_functionalized_v2"
TRITON_KERNEL_WRAPPER_FUNCTIONAL = "hop:triton_kernel_wrapper_functional"

# --- functional collectives (`torch.ops._c10d_functional`, and its autograd twin) ---------

C10D_ALL_GATHER_INTO_TENSOR = "_c10d_functional::all_gather_into_tensor.default"
C10D_ALL_REDUCE = "_c10d_functional::all_reduce.default"
C10D_ALL_REDUCE_INPLACE = "_c10d_functional::all_reduce_.default"
C10D_AUTOGRAD_ALL_GATHER_INTO_TENSOR = "_c10d_functional_autograd::all_gather_into_tensor.default"
C10D_AUTOGRAD_REDUCE_SCATTER_TENSOR = "_c10d_functional_autograd::reduce_scatter_tensor.default"
C10D_REDUCE_SCATTER_TENSOR = "_c10d_functional::reduce_scatter_tensor.default"
C10D_WAIT_TENSOR = "_c10d_functional::wait_tensor.default"

# --- vLLM's custom ops: `torch.ops._C` (kernels) and `torch.ops.vllm` (collectives) -------

VLLM_ALL_GATHER = "vllm::all_gather.default"
VLLM_ALL_REDUCE = "vllm::all_reduce.default"
VLLM_CUTLASS_SCALED_MM = "_C::cutlass_scaled_mm.default"
VLLM_DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT = "_C::dynamic_per_token_scaled_fp8_quant.default"
VLLM_DYNAMIC_SCALED_FP8_QUANT = "_C::dynamic_scaled_fp8_quant.default"
VLLM_FLASHINFER_ROTARY_EMBEDDING = "vllm::flashinfer_rotary_embedding.default"
VLLM_GELU_AND_MUL = "_C::gelu_and_mul.default"
VLLM_GELU_TANH_AND_MUL = "_C::gelu_tanh_and_mul.default"
VLLM_FUSED_ADD_RMS_NORM = "_C::fused_add_rms_norm.default"
VLLM_IR_FUSED_ADD_RMS_NORM = "vllm_ir::fused_add_rms_norm.default"
VLLM_IR_RMS_NORM = "vllm_ir::rms_norm.default"
VLLM_MROPE = "vllm::mrope.default"
VLLM_TRITON_MROPE = "vllm.model_executor.layers.rotary_embedding.mrope._triton_mrope_forward"
"""vLLM's CUDA MRoPE kernel, a user Triton kernel (named by `irfuse.raising.user_kernels`)."""
VLLM_PER_TOKEN_GROUP_FP8_QUANT = "_C::per_token_group_fp8_quant.default"
VLLM_PER_TOKEN_GROUP_FP8_QUANT_PACKED = "_C::per_token_group_fp8_quant_packed.default"
VLLM_UNIFIED_ATTENTION_WITH_OUTPUT = "vllm::unified_attention_with_output.default"
VLLM_UNIFIED_KV_CACHE_UPDATE = "vllm::unified_kv_cache_update.default"
VLLM_UNIFIED_MLA_ATTENTION_WITH_OUTPUT = "vllm::unified_mla_attention_with_output.default"
VLLM_UNIFIED_MLA_KV_CACHE_UPDATE = "vllm::unified_mla_kv_cache_update.default"
VLLM_REDUCE_SCATTER = "vllm::reduce_scatter.default"
VLLM_RMS_NORM = "_C::rms_norm.default"
VLLM_ROTARY_EMBEDDING = "_C::rotary_embedding.default"
VLLM_SCALED_FP4_QUANT_OUT = "_C::scaled_fp4_quant.out"
VLLM_SILU_AND_MUL = "_C::silu_and_mul.default"
VLLM_STATIC_SCALED_FP8_QUANT = "_C::static_scaled_fp8_quant.default"

# --- irfuse's own custom ops (`torch.ops.irfuse`), as model code may call them ------------

IRFUSE_ADD_RMS_NORM = "irfuse::add_rms_norm.default"
IRFUSE_NVFP4_PACK = "irfuse::nvfp4_pack.default"
IRFUSE_NVFP4_UNPACK = "irfuse::nvfp4_unpack.default"
IRFUSE_QUANT_FP8_GROUP = "irfuse::quant_fp8_group.default"
IRFUSE_QUANT_FP8_PER_TENSOR = "irfuse::quant_fp8_per_tensor.default"
IRFUSE_QUANT_FP8_PER_TOKEN = "irfuse::quant_fp8_per_token.default"
IRFUSE_QUANT_FP8_STATIC = "irfuse::quant_fp8_static.default"
IRFUSE_QUANT_NVFP4 = "irfuse::quant_nvfp4.default"
IRFUSE_RMS_NORM = "irfuse::rms_norm.default"
IRFUSE_SILU_MUL = "irfuse::silu_mul.default"


# --- spellings of one operation ----------------------------------------------------------------

ADD = (ADD_TENSOR, ADD_SCALAR)
MUL = (MUL_TENSOR, MUL_SCALAR)
DIV = (DIV_TENSOR, DIV_SCALAR)
CASTS = (TO_COPY, TO_DTYPE, PRIMS_CONVERT_ELEMENT_TYPE)
"""Dtype casts (`match.as_cast` reads each as (source, dtype))."""
SCALAR_MAKERS = (SCALAR_TENSOR, FULL, LIFT_FRESH_COPY)
"""Ops that may make a constant scalar tensor (`match.scalar_of`)."""
SPLITS = (SPLIT_TENSOR, SPLIT_WITH_SIZES, UNSAFE_SPLIT_TENSOR, UNSAFE_SPLIT_WITH_SIZES)
"""What `chunk` and `torch.split` become."""

# --- view ops ------------------------------------------------------------------------------------
# Every set of ops a matcher looks through, named once here.

VIEW_OPS = (VIEW, UNSAFE_VIEW)
"""The views proper (never a copy): two in a row collapse into one."""
RESHAPES = (VIEW, UNSAFE_VIEW, RESHAPE)
"""Ops that take the new shape as an argument: what a matcher that reads the shape looks through
(attention's head split and merge, a KV cache's flattening, the `view(-1, H)` of a linear)."""
VIEWS = (*RESHAPES, UNSQUEEZE, SQUEEZE_DIM, SQUEEZE_DIMS, SQUEEZE, ALIAS)
"""Ops that give the same elements, in the same order, under another shape: what value-level
matchers look through (`match.strip_views`, quant and GEMM operands)."""
VIEWS_AND_CLONE = (*VIEWS, CLONE)
"""Ops whose output holds the input's elements in order: the identity on values."""
VIEWS_AND_EXPAND = (*VIEWS, EXPAND)
"""VIEWS, and the broadcast of a mask to the attention's shape."""
SQUEEZES_BY_DIM = (SQUEEZE_DIM, SQUEEZE_DIMS)
"""The squeezes that name their dims."""
TRANSPOSES = (MATRIX_T, TRANSPOSE_INT, PERMUTE)
"""Ops that reorder dims."""
LAYOUTS = (*VIEWS, *TRANSPOSES, CLONE)
"""Ops that change a tensor's layout, not its values (a quant's operand seen through them)."""
DIM_VIEWS = (*RESHAPES, TRANSPOSE_INT, PERMUTE, UNSQUEEZE, SQUEEZE_DIM, ALIAS)
"""Views that move or regroup dims (with a clone: what may stand between an attention and its
quant; with the head joins and splits: between a per-head norm and the rope)."""
ROW_VIEWS = (*DIM_VIEWS, FLATTEN_USING_INTS, UNFLATTEN_INT)
"""DIM_VIEWS and the head joins and splits (vLLM's `_C` rotary, raised from auto_functionalized
v1, unflattens the flat q it reads): what may stand between a per-head norm and the rope where
each head's row stays whole (`rope_readings.normed`)."""
DIM_VIEWS_AND_CLONE = (*DIM_VIEWS, CLONE)
"""Ops between an attention and its quant that move no value: DIM_VIEWS, and the `clone` a
reshape of a transposed tensor decomposes into."""
RESHAPES_AND_FLATTENS = (*RESHAPES, FLATTEN_USING_INTS, UNFLATTEN_INT)
"""The head-dim splits and joins of a rotation (raise-rope reads each as a shape change of the
last dims; unsqueeze and alias it takes apart, as broadcasts and no-ops)."""
RESHAPES_AND_ALIAS = (*RESHAPES, ALIAS)
"""The views the no-op elimination removes when the result type is the input's (vLLM's set)."""
SAME_VALUE = (DETACH, VIEW_DTYPE)
"""A `detach` (a functional graph has no autograd to cut) and a `view.dtype` to the tensor's own
dtype (vLLM's VocabParallelEmbedding returns `output.view(output_dtype)` after its all-reduce):
no-ops where the result's type is the input's, which the no-op elimination also removes."""
RESHAPES_FLATTENS_AND_ALIAS = (*RESHAPES_AND_FLATTENS, ALIAS)
"""Shape changes that keep the elements' order: what may stand between vLLM's attention and the
quant of its output, or between a rope's rotated k and vLLM's cache write."""
VIEWS_FLATTENS_AND_SLICE = (*VIEWS, FLATTEN_USING_INTS, UNFLATTEN_INT, SLICE_TENSOR)
"""Views (and the slice of vLLM's qkv buffer) of v that may move up to the rope's place with the
fused RoPE + vLLM cache write."""
