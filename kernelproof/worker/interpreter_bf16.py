"""bf16 arithmetic in Triton's interpreter as a GPU computes it: in float32, rounded to nearest even.

Triton's interpreter (3.x) stores a bf16 tensor as its raw 16-bit patterns (numpy has no bf16),
and its arithmetic does not look past that: a product, a sum, a comparison, ``tl.dot`` or
``tl.exp`` of two bf16 blocks runs on the integers (a two-line bf16 multiply kernel gives NaN
and values near 1e38), and a float32 -> bf16 cast truncates the mantissa instead of rounding it.
A bf16 kernel correct on a GPU then failed on the CPU as a ``mismatch`` blamed on the solution
(I11: kernelproof's own limit must never be the solution's failure).

:func:`install` wraps the interpreter builder's element-wise operations, casts, fused
multiply-add and dot, and the reductions' sum, min and max, so that every bf16 operand is widened
to float32 (exact), the operation runs there, and a bf16 result is rounded back to nearest even,
as a GPU's bf16 units and ``cvt.rn.bf16.f32`` do. Operands of any other type go to the
interpreter's own code unchanged: an fp32 or fp16 kernel computes exactly as before. Installed in
the candidate's worker on the CPU, before the candidate's first line runs (worker/loading.py).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

_SIGN_EXP_MANTISSA = np.uint32(0xFFFF0000)


def to_float32(bits: np.ndarray) -> np.ndarray:
    """bf16 patterns (uint16) as the float32 values they stand for (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest even bf16, as uint16 patterns; NaN stays a (quiet) NaN."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    rounded = ((bits + rounding) >> np.uint32(16)).astype(np.uint16)
    quiet_nan = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(f), quiet_nan, rounded).astype(np.uint16)


def install() -> bool:
    """Make the interpreter's bf16 arithmetic right; True when Triton's interpreter was patched
    (False: no Triton here, or one whose interpreter does not have the names wrapped)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as ti
    except Exception:  # noqa: BLE001 - no Triton here: nothing to patch
        return False
    builder, reduce_ops = getattr(ti, "InterpreterBuilder", None), getattr(ti, "ReduceOps", None)
    needed = ("binary_op", "unary_op", "ternary_op", "cast_impl", "create_fma", "create_dot", "create_erf")
    if builder is None or reduce_ops is None or not all(hasattr(builder, n) for n in needed):
        return False
    if getattr(builder, "_kernelproof_bf16", False):
        return True
    _patch_builder(builder, ti.TensorHandle, tl)
    _patch_reductions(reduce_ops, tl)
    builder._kernelproof_bf16 = True
    return True


def _is_bf16(handle: Any, tl: Any) -> bool:
    dtype = getattr(handle, "dtype", None)
    return dtype is not None and getattr(dtype, "scalar", dtype) == tl.bfloat16


def _widened(handle: Any, tl: Any) -> np.ndarray:
    return to_float32(handle.data) if _is_bf16(handle, tl) else handle.data


def _narrowed(output: np.ndarray) -> np.ndarray:
    """A float result back to bf16 patterns; a bool (a comparison) or integer one as it is."""
    out = np.asarray(output)
    return to_bf16(out.astype(np.float32)) if out.dtype.kind == "f" else out


def _patch_builder(builder: type, handle_cls: type, tl: Any) -> None:
    binary_op, unary_op, ternary_op = builder.binary_op, builder.unary_op, builder.ternary_op
    cast_impl, fma, dot, erf = builder.cast_impl, builder.create_fma, builder.create_dot, builder.create_erf

    @functools.wraps(binary_op)
    def bf16_binary_op(self, lhs, rhs, op):
        if not (_is_bf16(lhs, tl) or _is_bf16(rhs, tl)):
            return binary_op(self, lhs, rhs, op)
        out = op(_widened(lhs, tl), _widened(rhs, tl))
        return handle_cls(_narrowed(out), lhs.dtype.scalar)

    @functools.wraps(unary_op)
    def bf16_unary_op(self, arg, op):
        if not _is_bf16(arg, tl):
            return unary_op(self, arg, op)
        return handle_cls(_narrowed(op(to_float32(arg.data))), arg.dtype.scalar)

    @functools.wraps(ternary_op)
    def bf16_ternary_op(self, lhs, rhs, other, op):
        # select (np.where) picks patterns and is right as it is; clip compares values
        if op is np.where or not (_is_bf16(rhs, tl) or _is_bf16(other, tl)):
            return ternary_op(self, lhs, rhs, other, op)
        out = op(_widened(lhs, tl), _widened(rhs, tl), _widened(other, tl))
        return handle_cls(_narrowed(out), other.dtype.scalar)

    @functools.wraps(cast_impl)
    def bf16_cast_impl(self, src, dst_type):
        src_bf16, dst_bf16 = _is_bf16(src, tl), dst_type.scalar == tl.bfloat16
        if not (src_bf16 or dst_bf16):
            return cast_impl(self, src, dst_type)
        values = to_float32(src.data) if src_bf16 else src.data
        if dst_bf16:
            data = values if src_bf16 else to_bf16(np.asarray(values).astype(np.float32))
            return handle_cls(np.asarray(data, dtype=np.uint16), dst_type.scalar)
        return cast_impl(self, handle_cls(np.asarray(values, dtype=np.float32), tl.float32), dst_type)

    @functools.wraps(fma)
    def bf16_fma(self, x, y, z):
        if not any(_is_bf16(h, tl) for h in (x, y, z)):
            return fma(self, x, y, z)
        product = np.multiply(_widened(x, tl), _widened(y, tl), dtype=np.float64)
        out = np.add(product, _widened(z, tl), dtype=np.float64).astype(np.float32)
        return handle_cls(to_bf16(out) if _is_bf16(z, tl) else out, z.dtype.scalar)

    @functools.wraps(dot)
    def bf16_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if not (_is_bf16(a, tl) or _is_bf16(b, tl) or _is_bf16(d, tl)):
            return dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = np.matmul(_widened(a, tl).astype(np.float32), _widened(b, tl).astype(np.float32))
        out = acc + _widened(d, tl).astype(np.float32)
        return handle_cls(to_bf16(out) if _is_bf16(d, tl) else out.astype(d.data.dtype), d.dtype.scalar)

    @functools.wraps(erf)
    def bf16_erf(self, arg):
        if not _is_bf16(arg, tl):
            return erf(self, arg)
        out = erf(self, handle_cls(to_float32(arg.data), tl.float32))
        return handle_cls(to_bf16(out.data), arg.dtype.scalar)

    def bf16_rsqrt(self, arg):
        return bf16_unary_op(self, arg, lambda x: 1 / np.sqrt(x))

    builder.binary_op = bf16_binary_op
    builder.unary_op = bf16_unary_op
    builder.ternary_op = bf16_ternary_op
    builder.cast_impl = bf16_cast_impl
    builder.create_fma = bf16_fma
    builder.create_dot = bf16_dot
    builder.create_erf = bf16_erf
    builder.create_rsqrt = bf16_rsqrt
    # the interpreter's lambdas (create_fadd = lambda self, l, r: self.binary_op(...)) find these
    # through self, so every element-wise operation and cast follows


def _patch_reductions(reduce_ops: type, tl: Any) -> None:
    sum_, min_max = reduce_ops.sum, reduce_ops.min_max

    @functools.wraps(sum_)
    def bf16_sum(self, input):
        if input.dtype.scalar != tl.bfloat16:
            return sum_(self, input)
        total = np.sum(to_float32(input.handle.data), axis=self.axis, keepdims=self.keep_dims)
        return self.to_tensor(to_bf16(np.asarray(total, dtype=np.float32)), input.dtype)

    @functools.wraps(min_max)
    def bf16_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        value = input[0] if isinstance(input, tuple) else input
        if value.dtype.scalar != tl.bfloat16:
            return min_max(self, input, val_reduce_op, idx_reduce_op)
        data = to_float32(value.handle.data)
        val = idx = None
        if val_reduce_op:
            reduced = val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims)
            val = self.to_tensor(to_bf16(np.asarray(reduced, dtype=np.float32)), value.dtype)
        if idx_reduce_op:
            idx = self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    reduce_ops.sum = bf16_sum
    reduce_ops.min_max = bf16_min_max
