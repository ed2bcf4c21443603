"""The summary: pooled runs, walks and break levels, the Markdown and its hand-written part, the plots,
and the committed H200 tables regenerated from their archive."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from benchmarks.cli import main
from benchmarks.metrics import proportion_interval
from benchmarks.sweep.markdown import HAND_WRITTEN_MARKER
from benchmarks.sweep.model import load_sweep
from benchmarks.sweep.plots import attainment_plot, attainment_rows, void_bars
from benchmarks.sweep.state import State, Step
from benchmarks.sweep.summary import summarize, write_summary
from tests.benchmarks.sweep.conftest import ROOT, attained, h200, not_run, record


def test_the_summary_pools_the_runs_of_a_scheduler_and_reads_sm_activity_while_serving(tmp_path):
    sweep, state = h200(repeats=2), State(tmp_path)
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    record(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1, 0.2])
    record(state, Step("mix", "solo", "L0", "greedy", "chat"), [0.1, 0.1])
    record(state, Step("mix", "mix", "L0", "credit"), [0.1, 0.3])
    record(state, Step("mix", "mix", "L0", "credit", repeat=2), [0.1, 0.3], error="chat: exit code -11")
    not_run(state, Step("mix", "mix", "L0", "partition"), "no GPU")
    summary = summarize(sweep, state)
    greedy = summary["workflows"]["mix"]["greedy"]
    assert greedy["runs"] == 2 and greedy["mean_attainment"] == pytest.approx(0.75)
    assert [r["mean_attainment"] for r in greedy["per_run"]] == [0.5, 1.0]
    assert greedy["sm_activity"] == pytest.approx(80.0) and greedy["sm_activity_run"] == 40.0
    chat = greedy["apps"]["chat"]
    assert (
        chat["requests"] == 4 and chat["slo_attainment"] == 0.75 and chat["slo_attainment_runs"] == [0.5, 1.0]
    )
    assert chat["latency_s"]["ttft"]["p50"] == pytest.approx(0.15)  # over the 4 requests pooled
    assert chat["solo_attainment"] == 1.0 and chat["slowdown_vs_solo"]["ttft"] == pytest.approx(1.5)
    # A run with a failed application is a broken measurement: reported, not averaged in.
    credit = summary["workflows"]["mix"]["credit"]
    assert credit["runs"] == 1 and credit["error"] == "run 2: chat: exit code -11"
    partition = summary["workflows"]["mix"]["partition"]
    assert (
        partition["runs"] == 0
        and partition["mean_attainment"] is None
        and partition["error"] == "run 1: no GPU"
    )
    assert summary["workflows"]["content-creation"]["greedy"]["runs"] == 0


def test_the_tables_say_what_each_run_s_scheduler_ran_with_read_from_its_result(tmp_path):
    # The sweep file may have changed since (the first sharing grid ran partition at 33 %, and its
    # sweep file now sets other shares): the tables read the settings from the runs' results.
    sweep, state = h200(repeats=3), State(tmp_path)
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9], scheduler={"params": {}})
    checked = {"25": {"status": "passed", "sms": 33}, "50": {"status": "passed", "sms": 66}}
    at = {
        1: {"chat": 25, "image": 50, "captions": 25},
        2: {"chat": 33, "image": 33, "captions": 33},
        3: {"chat": 25, "image": 50, "captions": 25},
    }
    for repeat, shares in at.items():
        record(
            state,
            Step("mix", "mix", "L0", "partition", repeat=repeat),
            [0.1],
            scheduler={
                "params": {"memory_limit": None, "stop_timeout_s": 10.0},
                "shares_percent": shares,
                **({"product_check": checked} if repeat != 2 else {}),
            },
        )
    summary = summarize(sweep, state)
    partition = summary["workflows"]["mix"]["partition"]
    assert [g["runs"] for g in partition["settings"]] == [[1, 3], [2]]
    assert partition["settings"][0]["product_check"] == {"25": "passed", "50": "passed"}
    assert summary["workflows"]["mix"]["greedy"]["settings"] == [{"runs": [1], "params": {}}]
    write_summary(sweep, state, tmp_path / "s.json", tmp_path / "s.md", "consumerbench sweep x --summarize")
    text = (tmp_path / "s.md").read_text()
    assert "- greedy: no parameters\n" in text
    # Greedy alone has nothing to say: no list.
    sweep = load_sweep(ROOT / "studies/h200/captions-crowd.yml")
    crowd = State(tmp_path / "crowd")
    record(crowd, Step("k4", "mix", "K", "greedy"), [0.1], scheduler={"params": {}})
    write_summary(sweep, crowd, tmp_path / "c.json", tmp_path / "c.md", "consumerbench sweep x --summarize")
    assert "Scheduler settings as run" not in (tmp_path / "c.md").read_text()
    assert (
        "- partition: runs 1, 3: SM shares chat 25 %, image 50 %, captions 25 % (product check: 25 % "
        "passed, 50 % passed); memory_limit none, stop_timeout_s 10.0; run 2: SM shares chat 33 %, "
        "image 33 %, captions 33 % (no product check recorded); memory_limit none, stop_timeout_s 10.0\n"
    ) in text


def test_an_applications_quality_figures_pool_the_requests_of_its_runs(tmp_path):
    sweep, state = h200(repeats=2), State(tmp_path)
    # Greedy misses at L0 (the knee), so the tables are at L0.
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9, 0.9], tokens_out=10)
    record(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1], tokens_out=50)
    record(state, Step("mix", "mix", "L0", "credit"), [0.1])
    summary = summarize(sweep, state)
    greedy, credit = (summary["workflows"]["mix"][s]["apps"]["chat"] for s in ("greedy", "credit"))
    # Per request, not a mean of the runs' means (which would say 30).
    assert greedy["quality"] == {"tokens_out": {"value": 20.0, "unit": "tokens/request", "count": 4}}
    assert credit["quality"] == {}


def test_the_walks_rows_and_break_levels_with_each_application_alone_above_the_knee(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.5)
    attained(state, Step("mix", "mix", "L1", "credit"), 1.0)
    attained(state, Step("mix", "mix", "L1", "partition"), 0.0)
    attained(state, Step("mix", "sweep", "L2", "credit"), 0.95)
    attained(state, Step("mix", "sweep", "L3", "credit"), 0.5)
    attained(state, Step("mix", "sweep", "L0", "partition"), 1.0)
    attained(state, Step("mix", "solo", "L3", "greedy", "chat"), 0.0)
    summary = summarize(sweep, state)
    assert summary["breaks"] == {
        "greedy": {"level": "L1", "pending": None, "ended": None},
        "credit": {"level": "L3", "pending": None, "ended": None},
        "partition": {"level": "L1", "pending": None, "ended": None},
    }
    rows = [(r["scheduler"], r["level"], r["mean_attainment"], r["alone"]) for r in summary["sweep"]]
    assert rows == [
        ("greedy", "L0", 1.0, {}),
        ("greedy", "L1", 0.5, {}),
        ("credit", "L1", 1.0, {}),
        ("credit", "L2", 0.95, {}),
        ("credit", "L3", 0.5, {"chat": 0.0}),
        ("partition", "L0", 1.0, {}),
        ("partition", "L1", 0.0, {}),
    ]
    assert summary["level"] == {
        "name": "L1",
        "load": "4 chat sessions, 2 image generators",
        "knee_below": 0.9,
    }


def test_a_walk_ended_by_a_failed_level_is_said_in_the_markdown(tmp_path):
    sweep, state = h200(), State(tmp_path / "state")
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    attained(state, Step("mix", "sweep", "L1", "greedy"), 0.0)
    attained(state, Step("mix", "mix", "L1", "partition"), 0.0)
    record(state, Step("mix", "sweep", "L0", "partition"), [0.1, 0.9])
    attained(state, Step("mix", "mix", "L1", "credit"), 1.0)
    not_run(state, Step("mix", "sweep", "L2", "credit"), "CUDA out of memory")
    write_summary(sweep, state, tmp_path / "s.json", tmp_path / "s.md", "consumerbench sweep x --summarize")
    breaks = json.loads((tmp_path / "s-sweep.json").read_text())["breaks"]
    assert breaks["partition"]["level"] == "L0"
    assert breaks["credit"] == {"level": None, "pending": None, "ended": "L2: CUDA out of memory"}
    text = (tmp_path / "s.md").read_text()
    assert (
        "Break levels: greedy L1, credit none before its sweep ended (L2: CUDA out of memory), partition L0."
        in text
    )
    assert "| L0 | one user of each application | partition | 50 % | chat 50 % |" in text


def test_the_markdown_keeps_its_hand_written_part_and_names_the_plots_drawn_beside_it(tmp_path):
    sweep, state = h200(repeats=2), State(tmp_path / "state")
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    record(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1, 0.2])
    md = tmp_path / "s.md"
    md.write_text(f"# old tables\n\n{HAND_WRITTEN_MARKER}\n\n## Findings\n\nby hand\n")
    _, plots = write_summary(
        sweep, state, tmp_path / "s.json", md, "consumerbench sweep x --summarize", "svg"
    )
    text = md.read_text()
    assert "old tables" not in text and text.endswith(f"{HAND_WRITTEN_MARKER}\n\n## Findings\n\nby hand\n")
    # Two runs: the t interval (12.7 standard errors wide) cut to 0-100 %.
    assert "| greedy | 2 | 75 % [0-100 %] (50 %, 100 %) | 80.0 % (40.0 %) |" in text
    assert [p.name for p in plots] == ["s-attainment.svg", "s-sm-activity.svg"]
    assert "`s-attainment.svg`, `s-sm-activity.svg`" in text and "![" not in text
    for plot in plots:
        assert ElementTree.parse(plot).getroot().tag.endswith("svg")
    _, plots = write_summary(sweep, state, tmp_path / "s.json", md, "consumerbench sweep x --summarize")
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in plots)


def _regenerate(tmp_path, sweep: str, archive: str, stem: str) -> str:
    """Summarize a committed archive into ``tmp_path`` as the committed files were; check the JSON files
    and the Markdown (its tables and hand-written part) are the committed ones; return the Markdown."""
    md = tmp_path / f"{stem}.md"
    md.write_text((ROOT / "docs/results" / f"{stem}.md").read_text())
    code = main(
        [
            "sweep",
            str(ROOT / "studies/h200" / sweep),
            "--summarize",
            "--from-archive",
            str(ROOT / "docs/results" / archive),
            "--json",
            str(tmp_path / f"{stem}.json"),
            "--md",
            str(md),
        ]
    )
    assert code == 0
    for name in (f"{stem}.json", f"{stem}-sweep.json"):
        assert (tmp_path / name).read_text() == (ROOT / "docs/results" / name).read_text()
    committed = (ROOT / "docs/results" / f"{stem}.md").read_text()
    # The same tables and the same hand-written part; only the command in the head names the paths given.
    assert md.read_text().split("\n")[5:] == committed.split("\n")[5:]
    return md.read_text()


def test_the_committed_h200_tables_are_regenerated_from_their_archive(tmp_path):
    _regenerate(tmp_path, "mix.yml", "h200-study-gpu.tar.gz", "schedulers-h200")


def test_variants_of_one_workflow_are_lined_up_in_one_table_and_different_workflows_are_not(tmp_path):
    # captions-crowd.yml's workflows are one workflow with K image processes (the level is the workflow).
    sweep = load_sweep(ROOT / "studies/h200/captions-crowd.yml")
    state = State(tmp_path / "state")
    for name, ttfts in (("k4", [0.1, 0.9]), ("k2", [0.1, 0.3]), ("k1", [0.2, 0.2]), ("k0", [0.1, 0.1])):
        record(state, Step(name, "mix", "K", "greedy"), ttfts)
    md = tmp_path / "s.md"
    write_summary(sweep, state, tmp_path / "s.json", md, "consumerbench sweep x --summarize")
    text = md.read_text()
    header = (
        "| workflow | scheduler | runs | mean attainment | SM activity serving | makespan (s) "
        "| chat ttft p50 / p99 (s) |"
    )
    assert "## The workflows side by side at level K" in text and header in text
    assert "| k4 | greedy | 1 | 50 % | 80.0 % | 4.5 | 0.500 / 0.892 |" in text
    assert "| k0 | greedy | 1 | 100 % | 80.0 % | 4.5 | 0.100 / 0.100 |" in text
    # mix.yml's two workflows (the mix, the content-creation DAG) have different applications.
    mixed, state = h200(), State(tmp_path / "mixed")
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])  # the knee at L0
    write_summary(mixed, state, tmp_path / "m.json", tmp_path / "m.md", "consumerbench sweep x --summarize")
    assert "side by side" not in (tmp_path / "m.md").read_text()


def test_the_attainment_plot_leaves_out_applications_without_an_slo_and_a_solo_series_of_nothing():
    workflows = {
        "b8": {
            "greedy": {
                "apps": {
                    "captions": {"slo_attainment": 1.0, "solo_attainment": None},
                    "busy-1": {"slo_attainment": None, "solo_attainment": None},
                }
            }
        }
    }
    assert attainment_rows(workflows, ["greedy"]) == (
        ["greedy"],
        [("b8: captions", {"solo": None, "greedy": 1.0})],
    )
    workflows["b8"]["greedy"]["apps"]["busy-1"]["solo_attainment"] = 0.5
    series, rows = attainment_rows(workflows, ["greedy"])
    assert series == ["solo", "greedy"] and [name for name, _ in rows] == ["b8: captions", "b8: busy-1"]


def test_the_attainment_plot_says_where_every_run_of_a_scheduler_was_void(tmp_path):
    # As in the first sharing grid: under partition every image was NaN, so its runs are void.
    workflows = {
        "mix": {
            "greedy": {"apps": {"image": {"slo_attainment": 1.0}}},
            "partition": {"apps": {}, "void": ["run 1: outputs not finite: image 0 % finite"]},
        }
    }
    assert void_bars(workflows) == {("mix: image", "partition")}
    assert attainment_plot(workflows, ["greedy", "partition"], tmp_path / "a.svg") is not None
    assert "void runs: left out" in (tmp_path / "a.svg").read_text()
    assert void_bars({"mix": {**workflows["mix"], "partition": {"apps": {}}}}) == set()


def test_a_load_level_row_names_an_application_that_failed_in_its_run(tmp_path):
    # A sweep without a search (a failed level ends a search's walk instead): the row's attainment
    # counts the failed application's unserved requests as misses, and the row says why.
    sweep = load_sweep(ROOT / "studies/h200/captions-crowd.yml")
    state = State(tmp_path / "state")
    record(state, Step("k4", "mix", "K", "greedy"), [0.1, 0.9], error="chat: exit code -11")
    summary = summarize(sweep, state)
    (row,) = summary["sweep"]
    assert row["failed"] == "chat: exit code -11"
    write_summary(sweep, state, tmp_path / "s.json", tmp_path / "s.md", "consumerbench sweep x --summarize")
    text = (tmp_path / "s.md").read_text()
    assert "| greedy | 50 % | chat 50 %; failed: chat: exit code -11 |" in text
    assert "| k4 | greedy | 0 | not run: run 1: chat: exit code -11 |" in text
    assert "| k2 | greedy | 0 | not run yet |" in text


def test_the_committed_sharing_grid_regenerates_with_the_runs_whose_images_were_nan_left_out(tmp_path):
    # Its partition runs computed on products MPS left unwritten (docs/results/mps-gemm-h100.md): every
    # image NaN, recorded (the runs predate nonfinite: fail); greedy's were all finite.
    text = _regenerate(
        tmp_path, "kernels-sharing.yml", "h100-kernels-sharing-33pct-gpu.tar.gz", "kernels-sharing-h100-33pct"
    )
    flagged = [line for line in text.splitlines() if line.startswith("|") and "outputs not finite" in line]
    assert len(flagged) == 3 + 3 + 3  # each level's row, grid row and workflow table row under partition
    assert all("| partition |" in line and "image 0 % finite" in line for line in flagged)
    # No figure of theirs is left in a table: the reason stands where the figures were.
    assert all(
        "| partition | void |" in line or "| partition | 0 | void: runs 1, 2, 3: " in line for line in flagged
    )
    sweep = json.loads((tmp_path / "kernels-sharing-h100-33pct-sweep.json").read_text())["sweep"]
    assert [bool(row.get("void")) for row in sweep] == [False] * 3 + [True] * 3
    grid = json.loads((tmp_path / "kernels-sharing-h100-33pct.json").read_text())["grid"]["mix"]
    void = ["runs 1, 2, 3: outputs not finite: image 0 % finite"]
    assert all(
        level["partition"]["runs"] == 0 and level["partition"]["void"] == void for level in grid.values()
    )
    # The sweep file now sets 25/50/25 %; the tables say the shares these runs had.
    shares = "- partition: SM shares chat 33 %, image 33 %, captions 33 % (no product check recorded); "
    assert text.count(shares) == 3


def test_the_committed_sharing_grid_at_checked_shares_regenerates_with_every_output_finite(tmp_path):
    # Its partition shares (25/50/25 %) passed the product check: no run flagged, and every cell has
    # its SM occupancy while serving (the figure the grid's reading turns on).
    text = _regenerate(
        tmp_path, "kernels-sharing.yml", "h100-kernels-sharing-gpu.tar.gz", "kernels-sharing-h100"
    )
    assert not [line for line in text.splitlines() if line.startswith("|") and "outputs not finite" in line]
    grid = json.loads((tmp_path / "kernels-sharing-h100.json").read_text())["grid"]["mix"]
    cells = [cell for level in grid.values() for cell in level.values()]
    assert len(cells) == 6 and all(cell["runs"] == 3 and cell["sm_occupancy"] > 0 for cell in cells)


def test_an_attainment_has_its_interval_and_threshold_curve_and_a_claim_on_too_few_requests_says_so(tmp_path):
    sweep, state = h200(repeats=2), State(tmp_path)
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])  # the knee at L0
    record(state, Step("mix", "mix", "L0", "greedy", repeat=2), [0.1, 0.55])  # met at 1.1x the SLO
    for repeat in (1, 2):
        record(state, Step("mix", "mix", "L0", "credit", repeat=repeat), [0.1] * 10)
    summary = summarize(sweep, state)
    greedy = summary["workflows"]["mix"]["greedy"]
    chat = greedy["apps"]["chat"]
    assert chat["slo_attainment_ci"] == pytest.approx(list(proportion_interval(2, 4)))
    assert chat["slo_attainment_curve"] == {"0.8": 0.5, "0.9": 0.5, "1": 0.5, "1.1": 0.75, "1.25": 0.75}
    # 2 of 4 against the study's 90 % goal: Wilson's upper bound 0.85 is below it.
    assert chat["claim"] == {
        "goal": 0.9, "verdict": "missed", "requests_due": 4, "requests_needed": 81, "too_few": False
    }  # fmt: skip
    assert greedy["mean_attainment_ci"] == [0.5, 0.5]
    credit = summary["workflows"]["mix"]["credit"]["apps"]["chat"]
    # 20 of 20 met: at the goal, but p90 needs 44 requests without a miss (MLPerf LoadGen's early stopping).
    assert credit["claim"] == {
        "goal": 0.9, "verdict": "inconclusive", "requests_due": 20, "requests_needed": 44, "too_few": True
    }  # fmt: skip
    md = tmp_path / "s.md"
    write_summary(sweep, state, tmp_path / "s.json", md, "consumerbench sweep x --summarize")
    text = md.read_text()
    assert "| attainment [95 % CI] (solo) | claim | attainment at SLO x 0.8 / 0.9 / 1 / 1.1 / 1.25 |" in text
    assert (
        "| chat | greedy | ttft<=0.5s | 50 % [15-85 %] (50 %, 50 %) (—) | missed (90 % goal) "
        "| 50 / 50 / 50 / 75 / 75 % |"
    ) in text
    assert (
        "| chat | credit | ttft<=0.5s | 100 % [84-100 %] (100 %, 100 %) (—) "
        "| inconclusive (90 % goal); too few requests: 20 of 44 needed | 100 / 100 / 100 / 100 / 100 % |"
    ) in text
    assert "| greedy | 2 | 50 % [50-50 %] (50 %, 50 %) |" in text


def test_a_void_run_leaves_every_figure_of_the_summary_with_its_reason_listed(tmp_path):
    sweep, state = h200(repeats=2), State(tmp_path)
    record(state, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    wrong = {"shares_percent": {"chat": 33}, "product_check": {"33": {"status": "failed", "sms": 44}}}
    record(state, Step("mix", "mix", "L0", "partition"), [0.1] * 5, scheduler=wrong)
    record(state, Step("mix", "mix", "L0", "partition", repeat=2), [0.1, 0.9])
    summary = summarize(sweep, state)
    partition = summary["workflows"]["mix"]["partition"]
    # The void run's five requests met: averaged in, they would lift 50 % to 75 % (or 86 % pooled).
    assert partition["runs"] == 1 and partition["mean_attainment"] == 0.5
    assert partition["apps"]["chat"]["requests"] == 2 and partition["apps"]["chat"]["slo_attainment"] == 0.5
    assert partition["void"] == ["run 1: product check failed at 33 %"]
    md = tmp_path / "s.md"
    write_summary(sweep, state, tmp_path / "s.json", md, "consumerbench sweep x --summarize")
    assert "| partition | 1 | 50 %; void, left out: run 1: product check failed at 33 % |" in md.read_text()
    # Every run void: no figure, the reasons instead.
    state2 = State(tmp_path / "all-void")
    record(state2, Step("mix", "sweep", "L0", "greedy"), [0.1, 0.9])
    record(state2, Step("mix", "mix", "L0", "partition"), [0.1] * 5, scheduler=wrong)
    summary = summarize(sweep, state2)
    assert summary["workflows"]["mix"]["partition"]["mean_attainment"] is None
    write_summary(sweep, state2, tmp_path / "v.json", tmp_path / "v.md", "consumerbench sweep x --summarize")
    assert "| partition | 0 | void: run 1: product check failed at 33 % |" in (tmp_path / "v.md").read_text()


def test_a_void_load_level_row_shows_why_instead_of_its_figures(tmp_path):
    sweep = load_sweep(ROOT / "studies/h200/captions-crowd.yml")
    state = State(tmp_path / "state")
    wrong = {"shares_percent": {"chat": 33}, "product_check": {"33": {"status": "failed", "sms": 44}}}
    record(state, Step("k4", "mix", "K", "greedy"), [0.1, 0.9], scheduler=wrong)
    (row,) = summarize(sweep, state)["sweep"]
    assert row["void"] == ["product check failed at 33 %"]
    write_summary(sweep, state, tmp_path / "s.json", tmp_path / "s.md", "consumerbench sweep x --summarize")
    assert "| greedy | void | product check failed at 33 % |" in (tmp_path / "s.md").read_text()
