"""The leaderboard's query forms offer the workflows with succeeded runs, each labelled with its runs."""

from __future__ import annotations

from typing import Any

from cbweb.leaderboard.forms import LeaderboardForm, PlatformCompareForm
from tests.cbweb.leaderboard.test_leaderboard_selectors import finish, launch, platform


def test_the_workflow_choices_name_the_owner_and_count_the_succeeded_runs(
    alice: Any, make_workflow: Any
) -> None:
    twice, once = make_workflow(alice, name="twice"), make_workflow(alice, name="once")
    make_workflow(alice, name="never")  # no succeeded run: not offered
    laptop = platform("laptop")
    for run in launch(twice, alice, 2):
        finish(run, laptop, 0.5)
    finish(launch(once, alice)[0], laptop, 0.5)
    expected = [
        (once.pk, f"once (#{once.pk}, alice, 1 run)"),
        (twice.pk, f"twice (#{twice.pk}, alice, 2 runs)"),
    ]
    for form in (LeaderboardForm(), PlatformCompareForm()):
        choices = [(c[0].value, c[1]) for c in form.fields["workflow"].choices]
        assert choices == expected
