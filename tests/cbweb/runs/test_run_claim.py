"""The claim that makes every duplicate delivery harmless: of many workers at once, exactly one wins."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from cbweb.runs.models import Run
from cbweb.runs.services import run_claim

CLAIMERS = 8


@pytest.mark.django_db(transaction=True)
def test_of_many_workers_claiming_one_run_at_once_exactly_one_gets_it(alice: Any, make_workflow: Any) -> None:
    # A bare row: run_create would hand it to an executor on commit.
    run = Run.objects.create(
        workflow_version=make_workflow(alice).versions.get(), scheduler="greedy", owner=alice
    )
    start = threading.Barrier(CLAIMERS)
    won: list[str] = []

    def claim(k: int) -> None:
        try:
            start.wait()
            if run_claim(run_id=run.pk, worker=f"w{k}"):
                won.append(f"w{k}")
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(k,)) for k in range(CLAIMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert Run.objects.get(pk=run.pk).worker == won[0]
