"""`consumerbench submit`'s own checks, made before it talks to any server (exit 2), and the commit
and branch it reads from git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.cli import git_meta, main

# Nothing listens here: every case below must stop before connecting.
SERVER = "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--meta", "owner=me"], "'owner=me': expected KEY=VALUE with KEY one of commit, branch, ci_url"),
        (["--meta", "tag"], "expected KEY=VALUE"),
        (["--meta", "ci_url=file:///etc/passwd"], "ci_url: must be an http:// or https:// URL"),
        (["--meta", "tag=a b"], "is not a tag"),
        (["--junit", "out.xml"], "--fail-on-regression and --junit need --baseline"),
        (["--fail-on-regression"], "need --baseline"),
        (["--baseline", "yesterday"], "--baseline is latest, a run id or tag=NAME, not 'yesterday'"),
        (["--baseline", "tag="], "--baseline is latest"),
        (["--baseline", "latest", "--alpha", "1.5"], "--alpha must lie between 0 and 1"),
        (["--baseline", "latest", "--min-effect", "-0.1"], "--min-effect is a fraction"),
    ],
)
def test_bad_submit_flags_are_usage_errors_before_any_request(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wf = tmp_path / "wf.yml"
    wf.write_text("nap: {type: Sleep, sleep_time: 0.01}\n")
    assert main(["submit", str(wf), "--server", SERVER, "--no-git", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "cannot reach" not in err


def test_submit_help_says_git_fills_the_commit_and_how_to_opt_out(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "filled in from `git`" in out and "--no-git" in out and "--baseline latest|RUN_ID|tag=NAME" in out


def test_git_meta_reads_commit_and_branch_of_a_checkout_and_nothing_elsewhere(tmp_path: Path) -> None:
    assert git_meta(tmp_path) == {}
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*argv: str) -> str:
        out = subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    git("init", "-q", "-b", "feature/gate")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "x")
    head = git("rev-parse", "HEAD")
    assert git_meta(repo) == {"commit": head, "branch": "feature/gate"}
    git("checkout", "-q", "--detach")
    assert git_meta(repo) == {"commit": head}  # a detached HEAD has no branch
