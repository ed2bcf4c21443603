"""Attack tests of issue 17 (a package, so that file names may repeat those of tests/workers)."""
