"""Issue 7's H200 scheduler study: its workflows, driver and device scripts (README.md)."""
