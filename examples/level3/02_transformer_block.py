"""Pre-norm transformer block in seven Triton launches, bf16 in and out, fp32 inside.

LayerNorm -> QKV GEMM -> fused (flash) attention -> projection GEMM with the residual add fused
-> LayerNorm -> MLP GEMM with GELU fused -> MLP GEMM with the residual add fused. The attention
kernel reads Q, K and V straight out of the QKV GEMM's (tokens, 3 x width) output through strides
and writes heads back in (tokens, width) order, so the reference's permute/reshape copies and its
(seq x seq) score tensors never exist. Bias, GELU and residual adds act on the fp32 accumulator,
with one bf16 rounding per stored tensor.

Triton's CPU interpreter multiplies bf16 tl.dot operands as their raw 16-bit patterns, so on a CPU
tensor the operands are widened to fp32 first (exact for bf16 values, same products, same fp32
accumulation); on the GPU the bf16 tensor-core path is used.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

GEMM_BLOCK_M = 128
GEMM_BLOCK_N = 128
GEMM_BLOCK_K = 64
GROUP_M = 8
ATTN_BLOCK_M = 128
ATTN_BLOCK_N = 64
LN_ROWS = 4


@triton.jit
def _layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    xc = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt_rn(tl.sum(xc * xc, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _linear_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    res_ptr,
    y_ptr,
    M,
    N,
    K,
    GELU: tl.constexpr,
    RESIDUAL: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # y = x @ W^T + bias [-> GELU] [+ residual]; x (M, K), W (N, K), y and residual (M, N), all contiguous.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    x_ptrs = x_ptr + offs_m[:, None] * K + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :] * K + offs_k[:, None]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=mask_m & (offs_k[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(offs_k[:, None] < K - k) & mask_n, other=0.0)
        if UPCAST:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    mask = mask_m & mask_n
    y = acc + tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if GELU:
        y = y * 0.5 * (1.0 + tl.math.erf(y * 0.7071067811865476))
    out_offs = offs_m[:, None] * N + offs_n[None, :]
    if RESIDUAL:
        y += tl.load(res_ptr + out_offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + out_offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    H,
    S,
    D,
    qk_scale,
    stride_in_b,
    stride_in_s,
    stride_out_b,
    stride_out_s,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # Q, K and V are (batch, seq, head, dim) views of the QKV output; O is (batch, seq, head, dim).
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    head_off = (bh % H) * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q_mask = (offs_m[:, None] < S) & d_ok[None, :]
    in_base = b * stride_in_b + head_off
    q = tl.load(q_ptr + in_base + offs_m[:, None] * stride_in_s + offs_d[None, :], mask=q_mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < S
        kv_mask = col_ok[:, None] & d_ok[None, :]
        kv_offs = in_base + cols[:, None] * stride_in_s + offs_d[None, :]
        k = tl.load(k_ptr + kv_offs, mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kv_offs, mask=kv_mask, other=0.0)
        if UPCAST:
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(col_ok[None, :], s * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        p = p.to(v.dtype)
        if UPCAST:
            pv = tl.dot(p.to(tl.float32), v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p, v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new

    out = acc / l_i[:, None]
    out_offs = b * stride_out_b + head_off + offs_m[:, None] * stride_out_s + offs_d[None, :]
    tl.store(o_ptr + out_offs, out.to(o_ptr.dtype.element_ty), mask=q_mask)


def _layer_norm(x, norm):
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _layer_norm_kernel[(triton.cdiv(rows, LN_ROWS),)](
        x, norm.weight, norm.bias, y, rows, cols, norm.eps, ROWS=LN_ROWS, BLOCK=block, num_warps=8
    )
    return y


def _linear(x, layer, gelu=False, residual=None):
    M, K = x.shape
    N = layer.weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, GEMM_BLOCK_M) * triton.cdiv(N, GEMM_BLOCK_N),)
    _linear_kernel[grid](
        x,
        layer.weight,
        layer.bias,
        y if residual is None else residual,
        y,
        M,
        N,
        K,
        GELU=gelu,
        RESIDUAL=residual is not None,
        UPCAST=x.device.type == "cpu",
        BLOCK_M=GEMM_BLOCK_M,
        BLOCK_N=GEMM_BLOCK_N,
        BLOCK_K=GEMM_BLOCK_K,
        GROUP_M=GROUP_M,
        num_warps=8,
        num_stages=4,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, d_model, num_heads, ffn_dim):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)

    def forward(self, x):
        batch, seq, width = x.shape
        heads = self.num_heads
        head_dim = width // heads
        x2 = x.contiguous().view(batch * seq, width)

        qkv = _linear(_layer_norm(x2, self.ln1), self.qkv)
        attn = torch.empty_like(x2)
        grid = (triton.cdiv(seq, ATTN_BLOCK_M), batch * heads)
        _attention_kernel[grid](
            qkv,
            qkv[:, width:],
            qkv[:, 2 * width :],
            attn,
            heads,
            seq,
            head_dim,
            1.4426950408889634 / math.sqrt(head_dim),
            seq * 3 * width,
            3 * width,
            seq * width,
            width,
            UPCAST=x.device.type == "cpu",
            BLOCK_M=ATTN_BLOCK_M,
            BLOCK_N=ATTN_BLOCK_N,
            BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
            num_warps=8,
            num_stages=3,
        )
        h = _linear(attn, self.proj, residual=x2)
        f = _linear(_layer_norm(h, self.ln2), self.fc1, gelu=True)
        return _linear(f, self.fc2, residual=h).view(batch, seq, width)
