"""The attention profiler: our kernel's variants against PyTorch's SDPA backends (docs/kernels.md).

``consumerbench kernels profile`` or ``python -m cbkernels.profile``; torch, Triton and ncu are used
lazily, so importing this package (and building its parser) needs none of them.
"""
