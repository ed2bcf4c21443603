"""The resumable state: state.json, one bundle per step, the archive a sweep is carried in."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from benchmarks.sweep.plan import pending
from benchmarks.sweep.state import State, Step, SweepError, extract_archive, write_archive
from tests.benchmarks.sweep.conftest import attained, h200


def test_a_step_interrupted_before_it_was_recorded_runs_again_and_the_others_are_kept(tmp_path):
    sweep, state = h200(), State(tmp_path)
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    # A call killed mid-step: its bundle half written, no entry, a temporary state file left behind.
    (tmp_path / "mix-sweep-L1-greedy").mkdir()
    (tmp_path / "state.tmp").write_text("{")
    again = State(tmp_path)
    assert [s.key for s in pending(sweep, again)] == ["mix/sweep/L1/greedy"]
    assert again.result(Step("mix", "sweep", "L0", "greedy"))["mean_attainment"] == 1.0
    attained(again, Step("mix", "sweep", "L1", "greedy"), 0.5)
    assert set(json.loads((tmp_path / "state.json").read_text())["steps"]) == {
        "mix/sweep/L0/greedy",
        "mix/sweep/L1/greedy",
    }


def test_a_state_file_that_is_not_a_sweep_state_says_so(tmp_path):
    (tmp_path / "state.json").write_text('{"step": []}')
    with pytest.raises(SweepError, match="not a sweep state"):
        State(tmp_path)


def test_a_bundle_name_that_leaves_the_state_folder_is_refused(tmp_path):
    state = State(tmp_path / "state")
    step = Step("mix", "sweep", "L0", "greedy")
    state.put(step, {"bundle": "../elsewhere", "status": "completed", "wall_s": 1})
    with pytest.raises(SweepError, match="not a folder name in the state folder"):
        state.result(step)


def test_the_archive_holds_the_state_and_bundles_without_images_and_replaces_the_last(tmp_path):
    state = State(tmp_path / "gpu")
    attained(state, Step("mix", "sweep", "L0", "greedy"), 1.0)
    (state.dir / "mix-sweep-L0-greedy" / "image-0.png").write_bytes(b"png")
    archive = tmp_path / "out" / "sweep.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"an older archive")
    write_archive(state.dir, archive)
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == [
            "gpu",
            "gpu/mix-sweep-L0-greedy",
            "gpu/mix-sweep-L0-greedy/chat.csv",
            "gpu/mix-sweep-L0-greedy/result.json",
            "gpu/mix-sweep-L0-greedy/telemetry",
            "gpu/mix-sweep-L0-greedy/telemetry/gpm.csv",
            "gpu/state.json",
        ]
    assert [p.name for p in archive.parent.iterdir()] == [archive.name]
    found = extract_archive(archive, tmp_path / "back")
    assert found == tmp_path / "back" / "gpu"
    assert State(found).result(Step("mix", "sweep", "L0", "greedy"))["mean_attainment"] == 1.0


def test_an_archive_entry_outside_its_folder_is_refused(tmp_path):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b'{"steps": {}}'
        info = tarfile.TarInfo("../escaped/state.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(SweepError, match="not a readable sweep archive"):
        extract_archive(archive, tmp_path / "into")
    assert not (tmp_path / "escaped").exists()


def test_a_file_that_is_not_an_archive_or_holds_no_state_says_so(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"not gzip")
    with pytest.raises(SweepError, match="not a readable sweep archive"):
        extract_archive(tmp_path / "x.tar.gz", tmp_path / "a")
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz"):
        pass
    with pytest.raises(SweepError, match=r"holds one folder with a state\.json, found 0"):
        extract_archive(tmp_path / "empty.tar.gz", tmp_path / "b")
