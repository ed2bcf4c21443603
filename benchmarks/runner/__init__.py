"""The DAG runner: one OS process per node, events over pipes, DAG semantics, cancellation.

Semantics (docs/workflow-format.md):
- a node starts when each of its dependencies has succeeded; a dependency on a background node is
  met once that node has loaded its model (it runs on, so it cannot be waited for);
- a node that fails (exception, crash, non-zero exit) marks every node downstream ``skipped``;
- background nodes are stopped (``stopped``) once every foreground node has finished;
- cancellation (a callable the caller polls, e.g. Ctrl-C or the web's cancel flag) stops every
  process within ``stop_grace_s`` plus one second and still returns what was measured.

Modules: ``checks`` (can the run start here: preflight), ``dag`` (the main loop), ``state`` (what it
knows of a node), ``process`` (inside an application process), ``records`` (request records on disk),
``result`` (the ResultDocument built from the node states and the records).
"""

from benchmarks.runner.checks import PreflightError, machine_problems, memory_problems, preflight
from benchmarks.runner.dag import TIME_LIMIT_REASON, RunSink, kernel_trace_refusal, run_workflow
from benchmarks.runner.records import RECORDS_DIR

__all__ = [
    "RECORDS_DIR",
    "TIME_LIMIT_REASON",
    "PreflightError",
    "RunSink",
    "kernel_trace_refusal",
    "machine_problems",
    "memory_problems",
    "preflight",
    "run_workflow",
]
