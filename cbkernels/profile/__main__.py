"""``python -m cbkernels.profile``: the profiler without the engine (GPU machines with torch and Triton)."""

from cbkernels.profile.cli import main

if __name__ == "__main__":  # importing the module (as tools that walk packages do) runs nothing
    raise SystemExit(main())
