"""The ``consumerbench`` command line.

Sub-commands of the engine live here; other packages (the Celery worker, the web client) add theirs
through the ``consumerbench.commands`` entry-point group, so the engine never imports them.
Exit codes: 0 success, 1 the run or a file had problems (what ``validate`` reports), 2 usage or set-up
error (bad flags, an ``--out`` that holds a bundle without ``--overwrite`` or other files, what
``validate --check-files`` adds: no GPU, a missing model or data file), 130 cancelled.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TextIO

from benchmarks import doctor, metrics, models, monitor, regress
from benchmarks.apps import app_type
from benchmarks.client import ApiError, Client
from benchmarks.files import UNRESTRICTED, FilePolicy, policy_from_env
from benchmarks.models.catalogue import PACKAGED, RANDOM
from benchmarks.monitor import cli as monitor_cli
from benchmarks.progress import RunProgress
from benchmarks.results import (
    ATTAINMENT_OF_REQUESTED,
    ResultDocument,
    SloRow,
    accelerators,
    default_out_dir,
    headline,
    quality_table,
    slo_table,
    write_bundle,
)
from benchmarks.runmeta import MetaError, check_meta, parse_meta_args
from benchmarks.runner import (
    PreflightError,
    kernel_trace_refusal,
    machine_problems,
    memory_problems,
    run_workflow,
)
from benchmarks.schedulers import SCHEDULERS, SchedulerError, SchedulerParamError, effective_choice
from benchmarks.spec.load import UnitCheck, load_file
from benchmarks.spec.model import WEIGHTS, SpecError, Workflow, WorkflowValidationError
from benchmarks.status import JobStatus, NodeStatus
from benchmarks.sweep import cli as sweep_cli
from benchmarks.table import text_table

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # An engine command loads no plugged-in command: the web extra's `worker` imports Django and Celery,
    # and `consumerbench doctor` must run where only the engine is installed (a GPU machine's image).
    parser = build_parser(plugins=False)
    if not argv or argv[0] not in _commands(parser):
        parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PROBLEMS
    return code


RESTRICT_HELP = (
    "apply the server's file access policy: every file the workflow names must lie under CB_DATA_DIRS "
    "or CB_MODEL_DIRS (comma-separated; default: the packaged data, models and model cache)"
)


def files_policy(args: argparse.Namespace) -> FilePolicy:
    """Return the policy a command reads files through: unrestricted unless ``--restrict-files``."""
    return policy_from_env() if args.restrict_files else UNRESTRICTED


WEIGHTS_ARGS = ("--weights",)
WEIGHTS_OPTIONS: dict[str, Any] = {
    "choices": WEIGHTS,
    "help": "random: run every model whose architecture its name tells as its random twin, e.g. "
    "meta-llama/Llama-3.2-3B-Instruct as llama-3.2-3b@random (overrides 'weights:'; docs/models.md)",
}


def scheduler_param(text: str) -> tuple[str, str]:
    """Parse one ``--scheduler-param NAME=VALUE`` (the value is checked by the scheduler's Params)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, e.g. pressure_threshold=0.4, not {text!r}")
    return name.strip(), value.strip()


SCHEDULER_PARAM_ARGS = ("--scheduler-param",)
SCHEDULER_PARAM_OPTIONS: dict[str, Any] = {
    "type": scheduler_param,
    "action": "append",
    "default": [],
    "metavar": "NAME=VALUE",
    "help": "a parameter of the scheduler, e.g. pressure_threshold=0.4 (repeatable; docs/schedulers.md)",
}


def scheduler_choice(workflow: Workflow, args: argparse.Namespace) -> tuple[str, dict[str, Any]] | None:
    """Return the run's scheduler and effective parameters from the workflow, ``--scheduler`` and
    ``--scheduler-param``; print what is wrong and return None when a parameter is bad."""
    try:
        return effective_choice(workflow, args.scheduler, dict(args.scheduler_param))
    except SchedulerParamError as exc:
        for param, message in exc.problems:
            print(f"error: --scheduler-param {param} ({exc.scheduler}): {message}", file=sys.stderr)
    except SchedulerError as exc:
        print(f"error: {exc}", file=sys.stderr)
    return None


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    """Return the names of a parser's sub-commands."""
    return {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }


def build_parser(plugins: bool = True) -> argparse.ArgumentParser:
    """Return the argument parser with the engine's commands and, with ``plugins``, every plugged-in
    command (the ``consumerbench.commands`` entry points)."""
    parser = argparse.ArgumentParser(prog="consumerbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(title="commands")

    run = sub.add_parser("run", help="run a workflow on this machine and write a result bundle")
    run.add_argument("file", type=Path)
    run.add_argument("--scheduler", choices=sorted(SCHEDULERS), help="override the workflow's scheduler")
    run.add_argument(*SCHEDULER_PARAM_ARGS, **SCHEDULER_PARAM_OPTIONS)
    run.add_argument("--out", type=Path, help="bundle directory (default results/<workflow>-<time>/)")
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the bundle already in --out (it stays until the new run has finished)",
    )
    run.add_argument("--repeat", type=int, help="run the workflow N times (overrides 'repeat:')")
    run.add_argument("--time-limit", type=float, help="fail the run after this many seconds")
    run.add_argument(
        "--monitor-hz",
        type=float,
        default=monitor.DEFAULT_HZ,
        help=f"system monitor samples per second, at most {monitor.MAX_HZ:g} (0: off)",
    )
    run.add_argument(
        "--kernel-trace",
        action="append",
        default=[],
        metavar="NODE",
        help="record every GPU kernel this node runs while it serves (repeatable; docs/monitor.md)",
    )
    run.add_argument("--restrict-files", action="store_true", help=RESTRICT_HELP)
    run.add_argument(*WEIGHTS_ARGS, **WEIGHTS_OPTIONS)
    run.set_defaults(func=cmd_run)

    validate = sub.add_parser("validate", help="check workflow files; exit 1 if any has problems")
    validate.add_argument("files", type=Path, nargs="+")
    validate.add_argument("--json", action="store_true", help="print the problems as JSON")
    validate.add_argument(
        "--check-files", action="store_true", help="also check this machine: GPU, model and data files"
    )
    validate.add_argument("--restrict-files", action="store_true", help=RESTRICT_HELP)
    validate.add_argument(*WEIGHTS_ARGS, **WEIGHTS_OPTIONS)
    validate.set_defaults(func=cmd_validate)

    models_cmd = sub.add_parser(
        "models", help="show what each model a workflow names resolves to here, and its random twin"
    )
    models_cmd.add_argument("files", type=Path, nargs="*", help="workflow files (none: list the catalogue)")
    models_cmd.add_argument("--json", action="store_true", help="print the answer as JSON")
    models_cmd.add_argument("--restrict-files", action="store_true", help=RESTRICT_HELP)
    models_cmd.set_defaults(func=cmd_models)

    doctor_cmd = sub.add_parser(
        "doctor", help="show what this machine can run, with a fix for each missing piece"
    )
    doctor_cmd.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor_cmd.set_defaults(func=cmd_doctor)

    submit = sub.add_parser(
        "submit",
        help="queue a workflow on a ConsumerBench server (for CI)",
        description="Store the workflow by name (your workflow of that name is reused; a new version is "
        "added only when the file changed) and queue a run of it. Inside a git checkout the run's commit "
        "and branch are filled in from `git` unless given with --meta (--no-git: do not). With --baseline "
        "the run is waited for and its per-request latencies compared with the baseline run's "
        "(docs/ci.md).",
    )
    submit.add_argument("file", type=Path)
    submit.add_argument("--server", default=os.environ.get("CB_SERVER"), help="server URL (env CB_SERVER)")
    submit.add_argument(
        "--token", default=os.environ.get("CB_API_TOKEN"), help="API token (env CB_API_TOKEN)"
    )
    submit.add_argument(
        "--name", help="workflow name on the server (default: the file's `name:`, else the file name)"
    )
    submit.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run metadata, repeatable: commit=SHA, branch=NAME, ci_url=URL, tag=NAME (repeat for several), "
        "note=TEXT",
    )
    submit.add_argument(
        "--no-git",
        action="store_true",
        help="do not fill in the commit and branch from `git` in the current directory",
    )
    submit.add_argument("--scheduler", choices=sorted(SCHEDULERS), help="override the workflow's scheduler")
    submit.add_argument(*SCHEDULER_PARAM_ARGS, **SCHEDULER_PARAM_OPTIONS)
    submit.add_argument("--platform", type=int, help="platform id (default: any live worker)")
    submit.add_argument(*WEIGHTS_ARGS, **WEIGHTS_OPTIONS)
    submit.add_argument("--wait", action="store_true", help="wait for the run to finish")
    submit.add_argument(
        "--fail-under", type=float, help="with --wait: exit 1 if mean SLO attainment is below"
    )
    submit.add_argument(
        "--require-slo",
        action="store_true",
        help="with --fail-under: also fail a run whose workflow has no SLOs (by default it passes)",
    )
    submit.add_argument(
        "--baseline",
        metavar="latest|RUN_ID|tag=NAME",
        help="wait, then compare the run's latencies with this run of the same workflow: the latest "
        "succeeded one before it, a run id, or the latest succeeded one with a tag",
    )
    submit.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="with --baseline: exit 1 if any application's latency metric regressed",
    )
    submit.add_argument(
        "--alpha",
        type=float,
        default=regress.DEFAULT_ALPHA,
        help="with --baseline: significance level of the one-sided Mann-Whitney U test (default 0.01)",
    )
    submit.add_argument(
        "--min-effect",
        type=float,
        default=regress.DEFAULT_MIN_EFFECT,
        help="with --baseline: smallest median slowdown that counts, as a fraction (default 0.05: 5 %%)",
    )
    submit.add_argument("--junit", type=Path, help="with --baseline: write the comparison as JUnit XML")
    submit.add_argument("--timeout", type=float, default=3600.0, help="with --wait: give up after S seconds")
    submit.add_argument("--poll", type=float, default=5.0, help="with --wait: seconds between polls")
    submit.set_defaults(func=cmd_submit)

    monitor_cli.register(sub)
    sweep_cli.register(sub)
    # cbkernels stands apart from the engine (it runs on GPU machines without the engine's dependencies):
    # the engine reaches it, never the reverse; its parser imports neither torch nor Triton.
    from cbkernels.profile import cli as kernels_cli

    kernels_cli.register(sub)
    for ep in entry_points(group="consumerbench.commands") if plugins else ():
        try:
            register = ep.load()
        except ImportError as exc:
            # e.g. `worker` without the web extra installed: the engine's commands still work.
            _register_unavailable(sub, ep.name, exc)
            continue
        register(sub)
    return parser


def _register_unavailable(sub: Any, name: str, exc: ImportError) -> None:
    message = (
        f"'{name}' is not available here: {exc} (install the web extra: pip install 'consumerbench[web]')"
    )

    def refuse(args: argparse.Namespace) -> int:
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE

    cmd = sub.add_parser(name, help=f"(unavailable: {exc})")
    cmd.set_defaults(func=refuse)


# --------------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    report: dict[str, list[dict[str, Any]]] = {}
    files = files_policy(args)
    checks: list[UnitCheck] = [files.unit_problems]
    if args.check_files:
        checks.append(lambda unit: machine_problems(unit, files))
    for path in args.files:
        problems: list[SpecError] = []
        try:
            workflow = load_file(path, unit_checks=checks, weights=args.weights)
        except WorkflowValidationError as exc:
            problems = exc.errors
        else:
            if args.check_files:  # what the units need together: their models' memory on the CPU
                problems = [SpecError((), None, message) for message in memory_problems(workflow)]
        report[str(path)] = [p.to_dict() for p in problems]
        if not args.json:
            if problems:
                print(f"{path}: {len(problems)} problem(s)")
                for p in problems:
                    print(f"  {p}")
            else:
                print(f"{path}: ok")
    if args.json:
        print(json.dumps({"files": report}, indent=1))
    return EXIT_PROBLEMS if any(report.values()) else EXIT_OK


# --------------------------------------------------------------------------------------------------
# models and doctor
# --------------------------------------------------------------------------------------------------


def cmd_models(args: argparse.Namespace) -> int:
    """Print what each unit's model resolves to here and its random twin (no files: the catalogue)."""
    search = files_policy(args).model_search()
    if not args.files:
        rows = [[name, *_catalogue_row(name)] for name in models.catalogue_names()]
        if args.json:
            print(
                json.dumps(
                    {
                        "catalogue": [
                            dict(zip(("name", "format", "description"), r, strict=True)) for r in rows
                        ]
                    },
                    indent=1,
                )
            )
        else:
            print(text_table([["name", "format", "description"], *rows], align="<<<"))
        return EXIT_OK
    report: dict[str, Any] = {}
    code = EXIT_OK
    for path in args.files:
        try:
            workflow = load_file(path)
        except WorkflowValidationError as exc:
            print(exc, file=sys.stderr)
            code = EXIT_PROBLEMS
            continue
        units = {
            name: {"type": unit.type, **models.describe(unit.model, search)}
            for name, unit in workflow.applications.items()
            if unit.model
        }
        report[str(path)] = units
        if not args.json:
            print(path)
            for name, unit in units.items():
                print(f"  {name} ({unit['type']}): {unit['model']}")
                print(f"    here: {_found_words(unit)}")
                twin = unit["twin"]
                print(
                    f"    random twin: {twin['model']} ({twin['description']}; {twin['params_b']:g} B "
                    f"parameters, {twin['cpu_memory_gb']:g} GB on the CPU)"
                    if twin
                    else "    random twin: none (the name tells no architecture this tool knows)"
                )
    if args.json:
        print(json.dumps({"files": report}, indent=1))
    return code


def _catalogue_row(name: str) -> list[str]:
    entry = PACKAGED.get(name)
    if entry is not None:
        return [entry.format, entry.description]
    random = RANDOM[name.removesuffix("@random")]
    return [random.format, random.description]


def _found_words(unit: Mapping[str, Any]) -> str:
    found = unit["found"]
    if found == "random":
        return "random weights, built from the name (no file)"
    if found == "catalogue":
        return f"catalogue model (package {unit['package']})"
    if found == "hub":
        return f"{unit['path']} (Hugging Face cache, {unit['hub_id']})"
    if found == "path":
        return str(unit["path"])
    return "not found; looked for " + "; ".join(unit.get("tried", []))


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print what this machine can run, with a fix for each missing piece; always exit 0."""
    checks = doctor.run_checks()
    if args.json:
        print(json.dumps({"checks": [c.to_dict() for c in checks]}, indent=1))
        return EXIT_OK
    for check in checks:
        print(f"{'ok  ' if check.ok else 'no  '} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"       fix: {check.fix}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------


class Progress:
    """One line per node: redrawn in place on a terminal, printed on each change otherwise.

    The figures are the engine's progress reducer's (``benchmarks.progress``), as on the run page.
    """

    def __init__(self, workflow: Workflow, stream: TextIO = sys.stdout) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.progress = RunProgress(workflow)
        self.names = list(workflow.nodes)
        self.width = max(len(n) for n in self.names)
        self.records = {n: app_type(workflow.unit_of(n)).record for n in self.names}
        # Nodes whose driver told how many records it will report (a stream's chunks, once loaded).
        self.planned: set[str] = set()
        self.drawn = False
        self.lock = threading.Lock()

    def on_event(self, event: Mapping[str, Any]) -> None:
        node = event.get("node")
        if node not in self.records or not self.progress.on_event(event):
            return
        kind = event["kind"]
        if kind == "load_end" and event.get("planned") is not None:
            self.planned.add(node)
        with self.lock:
            if self.tty:
                self._redraw()
            elif kind in ("node_status", "load_end"):
                print(f"{event['t']:8.2f}s  {self._line(node)}", file=self.stream, flush=True)

    def _line(self, node: str) -> str:
        st = self.progress.state["nodes"][node]
        if st["serves"]:
            done = f"serves {', '.join(st['serves'])}"
        elif self.records[node] == "request" or node in self.planned:
            done = f"{st['done']}/{st['total']} {self.records[node]}s"
        else:
            done = f"{st['done']} {self.records[node]}s"
        text = f"{node:<{self.width}}  {st['status']:<9} {done}"
        last = st["last"].get("e2e")
        if last is not None:
            text += f"  last e2e {last:.3f}s"
        if st["reason"] and NodeStatus(st["status"]).terminal:
            text += f"  ({st['reason']})"
        return text

    def _redraw(self) -> None:
        if self.drawn:
            self.stream.write(f"\x1b[{len(self.names)}F")
        for n in self.names:
            self.stream.write("\x1b[2K" + self._line(n)[:200] + "\n")
        self.stream.flush()
        self.drawn = True


def _interval(row: SloRow) -> str:
    """Return " [41-93 %]": the 95 % interval of a row's attainment, or nothing when it has none."""
    d = row.attainment_detail
    return "" if d is None else f" [{100 * d.low:.0f}-{100 * d.high:.0f} %]"


def summary_table(result: ResultDocument) -> str:
    """Return the end-of-run tables: one row per application and SLO metric, then one per quality
    figure (when any application has one), then the run's figures and where each node ran (its
    accelerator, ``benchmarks.results.accelerators``)."""
    rows = [
        ("node", "type", "status", "served/requested", "SLO met", "goodput", "metric", "p50", "p99", "load")
    ]
    status = {n.name: n.status for n in result.nodes}
    of_requested = f" {ATTAINMENT_OF_REQUESTED}" if result.partial() else ""
    for row in slo_table(result.applications):
        att = row.attainment
        rows.append(
            (
                row.application if row.first else "",
                row.type if row.first else "",
                status[row.application] if row.first else "",
                f"{row.requests_counted}/{row.requests_requested}" if row.first else "",
                ("no SLOs" if att is None else f"{att:.0%}{_interval(row)}{of_requested}")
                if row.first
                else "",
                f"{row.goodput_rps:.2f}/s" if row.first and row.goodput_rps is not None else "",
                row.metric,
                _secs(row.p50),
                _secs(row.p99),
                _secs(row.load_time_s) if row.first else "",
            )
        )
    lines = text_table([[str(c) for c in r] for r in rows], align="<" * len(rows[0])).splitlines()
    quality = [
        (q.application if q.first else "", q.name, q.value, str(q.count))
        for q in quality_table(result.applications)
    ]
    if quality:
        lines.append("")
        lines += text_table([("node", "quality", "value", "of"), *quality], align="<<<>").splitlines()
    fair = result.fairness
    figure = headline(
        result.mean_attainment, result.requests_served, result.requests_requested, result.partial()
    )
    lines.append("")
    lines.append(
        f"run {result.status}: {figure}, makespan {_secs(result.makespan_s)}, "
        f"fairness {'-' if fair is None else f'{fair:.3f}'}"
    )
    used = accelerators(
        result.model_dump(include={"nodes": True, "applications": {"__all__": {"name", "loaded"}}})
    )
    if used:
        lines.append("ran on: " + "; ".join(used))
    return "\n".join(lines)


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f}ms" if value < 1 else f"{value:.2f}s"


def cmd_run(args: argparse.Namespace) -> int:
    files = files_policy(args)
    try:
        # The file policy's refusals are problems of the file, at their lines, as `validate` gives them.
        workflow = load_file(args.file, unit_checks=[files.unit_problems], weights=args.weights)
    except WorkflowValidationError as exc:
        print(exc, file=sys.stderr)
        return EXIT_PROBLEMS
    choice = scheduler_choice(workflow, args)
    if choice is None:
        return EXIT_USAGE
    repeat = args.repeat or workflow.repeat
    if repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.monitor_hz <= monitor.MAX_HZ:
        print(f"--monitor-hz must be between 0 (off) and {monitor.MAX_HZ:g}", file=sys.stderr)
        return EXIT_USAGE
    refusal = kernel_trace_refusal(workflow, args.kernel_trace)
    if refusal:
        print(f"--kernel-trace: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    out = args.out or default_out_dir(workflow.name)
    refusal = _out_refusal(out, args.overwrite)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    # A bundle being replaced stays whole until the new one is: the run writes beside it.
    target = out.resolve().with_name(f".{out.resolve().name}.new-{os.getpid()}") if _is_bundle(out) else out
    cancel = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print("\ncancelling (Ctrl-C again to abort at once)...", file=sys.stderr)
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    results: list[ResultDocument] = []
    try:
        for i in range(1, repeat + 1):
            bundle = target / f"rep-{i}" if repeat > 1 else target
            if repeat > 1:
                print(f"== repetition {i}/{repeat}")
            try:
                result = run_workflow(
                    workflow,
                    scheduler=choice[0],
                    scheduler_params=choice[1],
                    sink=Progress(workflow),
                    cancel=cancel.is_set,
                    out_dir=bundle,
                    time_limit_s=args.time_limit,
                    repeat_index=i,
                    monitor_hz=args.monitor_hz or None,
                    files=files,
                    kernel_trace=args.kernel_trace,
                )
            except (PreflightError, SchedulerError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_USAGE
            path = write_bundle(result, bundle)
            print()
            print(summary_table(result))
            print(f"bundle: {out / path.relative_to(target)}")
            results.append(result)
            if cancel.is_set():
                break
        if len(results) > 1:
            _write_repeat_summary(results, target)
        if target != out:
            _replace_bundle(out.resolve(), target)
    finally:
        signal.signal(signal.SIGINT, previous)
        if target != out and target.exists():
            shutil.rmtree(target)  # the run stopped before its bundle was whole: the old one stays
    if cancel.is_set():
        return EXIT_CANCELLED
    failed = any(r.problem() is not None for r in results)
    return EXIT_PROBLEMS if failed else EXIT_OK


def _is_bundle(folder: Path) -> bool:
    """Return whether ``folder`` holds a result bundle of ``run`` (one run's, or a repeated run's)."""
    return any((folder / name).is_file() for name in ("result.json", "summary.json", "rep-1/result.json"))


def _out_refusal(out: Path, overwrite: bool) -> str | None:
    """Return why a run may not write into ``out`` (None: it may).

    A new or empty folder is written into; a bundle is replaced only with ``--overwrite``; a folder
    holding anything else is never written into, so that no file but a bundle's is ever deleted.
    """
    if not out.exists():
        return None
    if not out.is_dir():
        return f"--out {out} is a file, not a folder"
    if not any(out.iterdir()):
        return None
    if not _is_bundle(out):
        return f"--out {out} holds files that are not a result bundle; give a new or empty folder"
    if not overwrite:
        return f"--out {out} already holds a result bundle; give a new folder, or --overwrite to replace it"
    return None


def _replace_bundle(out: Path, new: Path) -> None:
    """Put the finished bundle ``new`` in place of the old bundle ``out``, with two renames."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(old)
    new.rename(out)
    shutil.rmtree(old)


def _write_repeat_summary(results: list[ResultDocument], out: Path) -> None:
    summary: dict[str, Any] = {"repetitions": len(results)}
    print(f"\nover {len(results)} repetitions (mean [95 % CI, cut to the figure's range]):")
    for key, bounds in (
        ("mean_attainment", (0.0, 1.0)),
        ("fairness", (0.0, 1.0)),
        ("makespan_s", (0.0, math.inf)),
    ):
        values = [v for r in results if (v := getattr(r, key)) is not None]
        e = metrics.estimate(values, bounds=bounds, min_runs=2)
        if e is None:
            continue
        _, half = metrics.mean_ci95(values)
        ci = None if e.low is None else [e.low, e.high]
        summary[key] = {"mean": e.mean, "ci95_half_width": half, "ci95": ci, "values": values}
        print(f"  {key:<16} {e.mean:.4f}" + (f" [{e.low:.4f}, {e.high:.4f}]" if ci else ""))
    partial = sum(r.partial() for r in results)
    if partial:
        print(f"  {partial} of {len(results)} partial: their attainment is {ATTAINMENT_OF_REQUESTED}")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


# --------------------------------------------------------------------------------------------------
# submit
# --------------------------------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    if not args.server:
        print("error: give --server URL (or set CB_SERVER)", file=sys.stderr)
        return EXIT_USAGE
    problem = _submit_usage_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        meta = parse_meta_args(args.meta)
        if not args.no_git:
            meta = {**git_meta(Path.cwd()), **meta}
        meta = check_meta(meta).as_dict()
    except MetaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        text = args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {args.file}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    api = Client(args.server, args.token)
    try:
        try:
            workflow = api.submit_workflow(text, args.name, args.file.stem)
        except ApiError as exc:
            if exc.status != 400:
                raise
            # The server found problems in the file: exit as `validate` and `run` do for them.
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_PROBLEMS
        stored = "new workflow" if workflow["workflow_created"] else "workflow"
        added = ", new version" if workflow["version_created"] else ""
        print(f"{stored} {workflow['id']} '{workflow['name']}' v{workflow['version']}{added}", flush=True)
        baseline = _find_baseline(api, args.baseline, workflow) if args.baseline else None
        meta = {k: v for k, v in meta.items() if v}
        run = api.create_run(
            workflow["id"],
            args.scheduler,
            args.platform,
            dict(args.scheduler_param),
            meta,
            weights=args.weights,
        )
        print(f"run {run['id']} {run['status']}: {run['url']}", flush=True)
        if not (args.wait or baseline):
            return EXIT_OK
        seen = [run["status"]]

        def show(current: dict[str, Any]) -> None:
            if current["status"] != seen[-1]:
                seen.append(current["status"])
                print(f"run {current['id']} {current['status']}", flush=True)

        run = api.wait(run["url"], args.timeout, args.poll, show)
        code = _report_submitted(run, args.fail_under, require_slo=args.require_slo)
        if baseline is None or run["status"] != JobStatus.SUCCEEDED:
            return code
        comparisons = regress.compare_runs(
            api.run_requests(baseline["id"]),
            api.run_requests(run["id"]),
            alpha=args.alpha,
            min_effect=args.min_effect,
        )
    except (ApiError, BaselineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return max(code, _report_regression(args, baseline, run, comparisons))


class BaselineError(RuntimeError):
    """The baseline run asked for does not exist or cannot be compared (exit 2)."""


def _submit_usage_problem(args: argparse.Namespace) -> str | None:
    """Return what is wrong with ``submit``'s flags together, or None."""
    if args.fail_under is not None and not ((args.wait or args.baseline) and 0 <= args.fail_under <= 1):
        return "--fail-under needs --wait and a fraction between 0 and 1"
    if (args.fail_on_regression or args.junit) and not args.baseline:
        return "--fail-on-regression and --junit need --baseline latest|RUN_ID|tag=NAME"
    if args.baseline and not (
        args.baseline == "latest"
        or args.baseline.isdigit()
        or (args.baseline.startswith("tag=") and args.baseline != "tag=")
    ):
        return f"--baseline is latest, a run id or tag=NAME, not {args.baseline!r}"
    if not 0 < args.alpha < 1:
        return "--alpha must lie between 0 and 1"
    if not 0 <= args.min_effect < 10:
        return "--min-effect is a fraction: 0.05 means 5 %"
    return None


def git_meta(where: Path) -> dict[str, str]:
    """Return the commit and branch of the git checkout at ``where`` (``{}`` outside one or without
    git; no branch on a detached HEAD)."""
    import subprocess

    def git(*argv: str) -> str:
        out = subprocess.run(["git", *argv], cwd=where, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        commit = git("rev-parse", "HEAD")
        branch = git("rev-parse", "--abbrev-ref", "HEAD") if commit else ""
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {"commit": commit} if commit else {}
    if branch and branch != "HEAD":
        found["branch"] = branch
    return found


def _find_baseline(api: Client, which: str, workflow: Mapping[str, Any]) -> dict[str, Any]:
    """Return the baseline run of ``--baseline`` for the submitted workflow; raise BaselineError."""
    name = workflow["name"]
    if which.isdigit():
        try:
            run = api.run(int(which))
        except ApiError as exc:
            if exc.status == 404:
                raise BaselineError(f"baseline run {which} not found") from None
            raise
        if run["workflow_name"] != name:
            raise BaselineError(
                f"baseline run {which} is of workflow '{run['workflow_name']}', not '{name}': "
                "compare runs of one workflow"
            )
    else:
        tag = which.removeprefix("tag=") if which.startswith("tag=") else None
        found = api.latest_run(
            workflow=workflow["id"], status=JobStatus.SUCCEEDED.value, **({"tag": tag} if tag else {})
        )
        if found is None:
            with_tag = f" tagged '{tag}'" if tag else ""
            raise BaselineError(f"no succeeded run{with_tag} of workflow '{name}' to use as the baseline")
        run = found
    if run["status"] != JobStatus.SUCCEEDED:
        raise BaselineError(
            f"baseline run {run['id']} is {run['status']}: only a succeeded run is a baseline"
        )
    print(f"baseline: run {run['id']} ({run['workflow_name']} v{run['workflow_version']})", flush=True)
    return run


def _report_regression(
    args: argparse.Namespace,
    baseline: Mapping[str, Any],
    run: Mapping[str, Any],
    comparisons: Sequence[regress.Comparison],
) -> int:
    print(
        f"run {run['id']} against baseline run {baseline['id']} (one-sided Mann-Whitney U, "
        f"alpha {args.alpha:g}, min effect {args.min_effect:.0%} on the median ratio):"
    )
    print(text_table(regress.table_rows(comparisons), "<<>>>><"))
    if args.junit:
        suite = f"{run['workflow_name']} run {run['id']} vs {baseline['id']}"
        args.junit.write_text(
            regress.junit_xml(comparisons, suite=suite, alpha=args.alpha, min_effect=args.min_effect),
            encoding="utf-8",
        )
    worse = regress.regressed(comparisons)
    if not worse:
        print("no significant regression")
        return EXIT_OK
    named = ", ".join(f"{c.application} {c.metric} ({c.ratio:.2f}x)" for c in worse)
    print(f"regressed: {named}", file=sys.stderr)
    return EXIT_PROBLEMS if args.fail_on_regression else EXIT_OK


def _report_submitted(run: Mapping[str, Any], fail_under: float | None, *, require_slo: bool = False) -> int:
    summary = run.get("summary") or {}
    partial = run["status"] != JobStatus.SUCCEEDED
    for app in summary.get("applications", []):
        att = app.get("slo_attainment")
        served = ""
        if app.get("requests_requested") is not None:
            served = f"  served {app.get('requests_served')} of {app['requests_requested']}"
        met = "no SLOs" if att is None else f"{att:.1%}" + (f" {ATTAINMENT_OF_REQUESTED}" if partial else "")
        print(f"  {app['name']:<24} {app['type']:<14} SLO met {met}{served}")
    mean = summary.get("mean_attainment")
    # The server's headline (benchmarks.results.headline); a run stored without one says what it can.
    figure = summary.get("headline") or ("partial" if partial else headline(mean, 0, 0, False))
    print(f"run {run['id']} {run['status']}: {figure}")
    if partial:
        if run.get("error"):
            print(f"error: {run['error']}", file=sys.stderr)
        return EXIT_PROBLEMS
    if fail_under is None:
        return EXIT_OK
    if mean is None:
        if require_slo:
            print("the workflow has no SLOs (--require-slo)", file=sys.stderr)
            return EXIT_PROBLEMS
        return EXIT_OK
    if mean < fail_under:
        print(f"mean SLO attainment below {fail_under:.1%}", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
