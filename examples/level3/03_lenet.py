"""LeNet-5 in three Triton kernels: two fused conv-bias-ReLU-maxpool stages and one fused MLP, fp32.

Each conv stage is an implicit GEMM over a block of pooled output positions and all output
channels: for each of the four positions of every 2 x 2 pooling window it gathers the (positions x
kernel taps) input tile and multiplies it by the (taps x channels) weights, then keeps the max of
the four sums, adds the bias and applies the ReLU (max-pool, bias and ReLU commute, since rounding
is monotonic), so neither the pre-pool maps nor the ReLU outputs are ever stored. Those dots run as
tf32x3 (fp32-accurate split precision on the tensor cores). The three Linear layers run in one
kernel per block of images with the 120- and 84-wide activations held on chip; they are small, so
their dots run in IEEE fp32 ("ieee").
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONV_BLOCK = 128
MLP_BLOCK_B = 32


@triton.jit
def _conv_relu_pool_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    total,
    C_IN: tl.constexpr,
    H: tl.constexpr,
    W: tl.constexpr,
    C_OUT: tl.constexpr,
    KS: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # y[n, co, ph, pw] = relu(bias[co] + max over the 2x2 window of conv(x, w)[n, co, 2ph + dy, 2pw + dx])
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p_ok = offs < total
    img = offs // (PH * PW)
    rem = offs % (PH * PW)
    ph = rem // PW
    pw = rem % PW
    offs_c = tl.arange(0, BLOCK_C)
    c_ok = offs_c < C_OUT
    offs_k = tl.arange(0, BLOCK_K)
    x_win = x_ptr + img.to(tl.int64) * (C_IN * H * W) + (2 * ph) * W + 2 * pw

    acc00 = tl.zeros((BLOCK, BLOCK_C), dtype=tl.float32)
    acc01 = tl.zeros((BLOCK, BLOCK_C), dtype=tl.float32)
    acc10 = tl.zeros((BLOCK, BLOCK_C), dtype=tl.float32)
    acc11 = tl.zeros((BLOCK, BLOCK_C), dtype=tl.float32)
    for k0 in range(0, C_IN * KS * KS, BLOCK_K):
        k = k0 + offs_k
        k_ok = k < C_IN * KS * KS
        ci = k // (KS * KS)
        kh = (k // KS) % KS
        kw = k % KS
        w = tl.load(
            w_ptr + offs_c[None, :] * (C_IN * KS * KS) + k[:, None],
            mask=k_ok[:, None] & c_ok[None, :],
            other=0.0,
        )
        taps = x_win[:, None] + (ci * (H * W) + kh * W + kw)[None, :]
        mask = p_ok[:, None] & k_ok[None, :]
        acc00 = tl.dot(tl.load(taps, mask=mask, other=0.0), w, acc00, input_precision="tf32x3")
        acc01 = tl.dot(tl.load(taps + 1, mask=mask, other=0.0), w, acc01, input_precision="tf32x3")
        acc10 = tl.dot(tl.load(taps + W, mask=mask, other=0.0), w, acc10, input_precision="tf32x3")
        acc11 = tl.dot(tl.load(taps + W + 1, mask=mask, other=0.0), w, acc11, input_precision="tf32x3")

    pooled = tl.maximum(tl.maximum(acc00, acc01), tl.maximum(acc10, acc11))
    pooled += tl.load(b_ptr + offs_c, mask=c_ok, other=0.0)[None, :]
    out = tl.maximum(pooled, 0.0)
    y_offs = img.to(tl.int64)[:, None] * (C_OUT * PH * PW) + offs_c[None, :] * (PH * PW) + rem[:, None]
    tl.store(y_ptr + y_offs, out, mask=p_ok[:, None] & c_ok[None, :])


@triton.jit
def _mlp3_kernel(
    x_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    w3_ptr,
    b3_ptr,
    y_ptr,
    B,
    K1: tl.constexpr,
    N1: tl.constexpr,
    N2: tl.constexpr,
    N3: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_N2: tl.constexpr,
    P1: tl.constexpr,
    P3: tl.constexpr,
):
    # y = fc3(relu(fc2(relu(fc1(x))))) for BLOCK_B rows. P1 and P3 are N1 and N3 padded to powers of two;
    # fc2 runs in BLOCK_N2-wide column chunks, each chunk's ReLU output feeding fc3 at once.
    offs_b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_ok = offs_b < B
    offs_k = tl.arange(0, BLOCK_K)
    n1 = tl.arange(0, P1)
    n3 = tl.arange(0, P3)

    h1 = tl.zeros((BLOCK_B, P1), dtype=tl.float32)
    for k0 in range(0, K1, BLOCK_K):
        k = k0 + offs_k
        k_ok = k < K1
        a = tl.load(
            x_ptr + offs_b.to(tl.int64)[:, None] * K1 + k[None, :],
            mask=b_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w = tl.load(
            w1_ptr + n1[None, :] * K1 + k[:, None], mask=k_ok[:, None] & (n1[None, :] < N1), other=0.0
        )
        h1 = tl.dot(a, w, h1, input_precision="ieee")
    h1 = tl.maximum(h1 + tl.load(b1_ptr + n1, mask=n1 < N1, other=0.0)[None, :], 0.0)

    out = tl.zeros((BLOCK_B, P3), dtype=tl.float32)
    for c0 in range(0, N2, BLOCK_N2):
        n2 = c0 + tl.arange(0, BLOCK_N2)
        n2_ok = n2 < N2
        w2 = tl.load(
            w2_ptr + n2[None, :] * N1 + n1[:, None], mask=(n1[:, None] < N1) & n2_ok[None, :], other=0.0
        )
        h2 = tl.dot(h1, w2, input_precision="ieee") + tl.load(b2_ptr + n2, mask=n2_ok, other=0.0)[None, :]
        h2 = tl.maximum(h2, 0.0)
        w3 = tl.load(
            w3_ptr + n3[None, :] * N2 + n2[:, None], mask=n2_ok[:, None] & (n3[None, :] < N3), other=0.0
        )
        out = tl.dot(h2, w3, out, input_precision="ieee")
    out += tl.load(b3_ptr + n3, mask=n3 < N3, other=0.0)[None, :]
    tl.store(y_ptr + offs_b[:, None] * N3 + n3[None, :], out, mask=b_ok[:, None] & (n3[None, :] < N3))


def _conv_relu_pool(x, conv):
    n, c_in, h, w = x.shape
    c_out, _, ks, _ = conv.weight.shape
    ph, pw = (h - ks + 1) // 2, (w - ks + 1) // 2
    y = torch.empty((n, c_out, ph, pw), device=x.device, dtype=torch.float32)
    total = n * ph * pw
    _conv_relu_pool_kernel[(triton.cdiv(total, CONV_BLOCK),)](
        x,
        conv.weight,
        conv.bias,
        y,
        total,
        C_IN=c_in,
        H=h,
        W=w,
        C_OUT=c_out,
        KS=ks,
        PH=ph,
        PW=pw,
        BLOCK_C=max(16, triton.next_power_of_2(c_out)),
        BLOCK_K=32,
        BLOCK=CONV_BLOCK,
        num_warps=8,
        num_stages=2,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = _conv_relu_pool(x.contiguous(), self.conv1)
        x = _conv_relu_pool(x, self.conv2)
        batch = x.shape[0]
        k1, n1, n2, n3 = (
            self.fc1.in_features,
            self.fc1.out_features,
            self.fc2.out_features,
            self.fc3.out_features,
        )
        y = torch.empty((batch, n3), device=x.device, dtype=torch.float32)
        _mlp3_kernel[(triton.cdiv(batch, MLP_BLOCK_B),)](
            x,
            self.fc1.weight,
            self.fc1.bias,
            self.fc2.weight,
            self.fc2.bias,
            self.fc3.weight,
            self.fc3.bias,
            y,
            batch,
            K1=k1,
            N1=n1,
            N2=n2,
            N3=n3,
            BLOCK_B=MLP_BLOCK_B,
            BLOCK_K=32,
            BLOCK_N2=32,
            P1=triton.next_power_of_2(n1),
            P3=max(16, triton.next_power_of_2(n3)),
            num_warps=4,
        )
        return y
