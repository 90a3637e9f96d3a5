"""cuBLAS and cuBLASLt reached through PyTorch, in several dtypes.

cuBLAS (torch's default BLAS backend): fp32 without and with TF32, fp64, fp16, bf16, batched
bf16. Then cuBLASLt: the same products with torch.backends.cuda.preferred_blas_library
("cublaslt"), a linear layer with bias (cublasLt's bias epilogue), and, on compute capability
8.9 and up, an fp8 torch._scaled_mm (cuBLASLt only). libcublas / libcublasLt allocate some
memory of their own, outside PyTorch's books: the journal's per-module totals show it.
"""

import sys

import torch

from vramledger_marks import checkpoint, checksum, init_cuda, say

M, K, N = 1024, 2048, 768


def products(dev, gen, tag):
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        a = torch.randn(M, K, device=dev, generator=gen, dtype=torch.float32).to(dtype)
        b = torch.randn(K, N, device=dev, generator=gen, dtype=torch.float32).to(dtype)
        c = a @ b
        say(tag, "mm", str(dtype).replace("torch.", ""), checksum(c))
    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(M, K, device=dev, generator=gen)
    b = torch.randn(K, N, device=dev, generator=gen)
    say(tag, "mm", "float32_tf32", checksum(a @ b))
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4, 256, 512, device=dev, generator=gen).to(torch.bfloat16)
    b = torch.randn(4, 512, 128, device=dev, generator=gen).to(torch.bfloat16)
    say(tag, "bmm", "bfloat16", checksum(torch.bmm(a, b)))


def main():
    dev = init_cuda(0)
    checkpoint("init", 0)
    gen = torch.Generator(device=dev)
    gen.manual_seed(2024)

    products(dev, gen, "cublas")
    checkpoint("after_cublas", 0)

    try:
        torch.backends.cuda.preferred_blas_library("cublaslt")
        say("preferred_blas_library", "cublaslt")
        lt = True
    except Exception as e:  # deterministic: the same on every run of this torch
        say("preferred_blas_library", "unavailable", type(e).__name__)
        lt = False
    if lt:
        products(dev, gen, "cublaslt")

    x = torch.randn(512, K, device=dev, generator=gen).to(torch.bfloat16)
    w = torch.randn(N, K, device=dev, generator=gen).to(torch.bfloat16)
    bias = torch.randn(N, device=dev, generator=gen).to(torch.bfloat16)
    say("cublaslt", "linear_bias", "bfloat16", checksum(torch.nn.functional.linear(x, w, bias)))
    xf = x.float()
    wf = w.float()
    bf = bias.float()
    say("cublaslt", "addmm_bias", "float32", checksum(torch.addmm(bf, xf, wf.t())))

    cap = torch.cuda.get_device_capability(dev)
    if cap >= (8, 9) and hasattr(torch, "_scaled_mm"):
        try:
            a8 = (torch.randn(256, K, device=dev, generator=gen) * 0.5).to(torch.float8_e4m3fn)
            b8 = (torch.randn(N, K, device=dev, generator=gen) * 0.5).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=dev, dtype=torch.float32)
            out = torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            if isinstance(out, tuple):
                out = out[0]
            say("cublaslt", "scaled_mm", "float8_e4m3fn", checksum(out))
        except Exception as e:
            say("cublaslt", "scaled_mm", "failed", type(e).__name__)
    else:
        say("cublaslt", "scaled_mm", "skipped_capability")
    checkpoint("after_cublaslt", 0)

    if lt:
        torch.backends.cuda.preferred_blas_library("cublas")
    torch.cuda.empty_cache()
    checkpoint("end", 0)
    say("done", "cublas_direct")


if __name__ == "__main__":
    sys.exit(main())
