"""GPU kernels (Triton first, CUDA where it pays) and their profiler; GPU imports stay lazy.

Not named ``kernels``: that is Hugging Face's kernel hub package, which transformers 5 imports when it
finds it, and a ``kernels`` folder at the repository root would be found first.
"""
