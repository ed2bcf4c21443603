"""``python -m cbkernels.profile``: the profiler without the engine (GPU machines with torch and Triton)."""

from cbkernels.profile.cli import main

raise SystemExit(main())
