from __future__ import annotations

from typing import Any

from cbweb.runs.models import ApplicationResult
from tests.cbweb.leaderboard.test_leaderboard_selectors import finish, launch, platform


def test_the_platform_page_shows_hardware_libraries_workflows_and_runs(
    client: Any, alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    box = platform("box", gpu=True)
    box.info["libraries"] = {"torch": "2.13.0", "diffusers": None}
    box.info["gpus"][0].update(driver="570.1", cuda="12.8")
    box.save()
    finish(launch(workflow, alice)[0], box, 0.5)
    launch(workflow, alice)  # queued, not on the platform
    page = client.get(f"/platforms/{box.pk}/").content.decode()
    assert "NVIDIA H200, 150.0\xa0GB, driver 570.1, CUDA 12.8" in page
    assert "<td>torch</td><td>2.13.0</td>" in page and "<td>diffusers</td><td>not installed</td>" in page
    assert f'href="/leaderboard/?workflow={workflow.pk}&amp;platform={box.pk}"' in page
    assert "1 in all" in page
    assert client.get("/platforms/999999/").status_code == 404
    listing = client.get("/platforms/").content.decode()
    assert f'href="/platforms/{box.pk}/"' in listing and 'href="/platforms/compare/"' in listing


def test_the_comparison_shows_two_platforms_side_by_side(client: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    m1, x86 = platform("m1"), platform("x86")
    for on, attainment in ((m1, 1.0), (x86, 0.5)):
        run = finish(launch(workflow, alice)[0], on, attainment)
        ApplicationResult.objects.create(
            run=run,
            name="first",
            unit="sleep1",
            type="Sleep",
            device="cpu",
            priority="medium",
            slo_attainment=attainment,
            metrics={"e2e": {"p50": 0.25, "p99": 0.5}},
        )
    response = client.get(f"/platforms/compare/?workflow={workflow.pk}&platforms={m1.pk}&platforms={x86.pk}")
    page = response.content.decode()
    assert response.status_code == 200
    assert "m1 (AMD EPYC)" in page and "x86 (AMD EPYC)" in page
    assert "first: e2e p50 / p99 (s)" in page and "0.2500" in page and "50.0 %" in page


def test_the_comparison_needs_two_platforms_and_a_known_workflow(
    client: Any, alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    box = platform("box")
    finish(launch(workflow, alice)[0], box, 1.0)
    one = client.get(f"/platforms/compare/?workflow={workflow.pk}&platforms={box.pk}")
    assert one.status_code == 400 and "pick two or more platforms" in one.content.decode()
    assert client.get("/platforms/compare/?workflow=x&platforms=1&platforms=2").status_code == 400
    assert client.get("/platforms/compare/").status_code == 200


def test_the_comparison_links_each_scheduler_configuration(
    client: Any, alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    m1, x86 = platform("m1"), platform("x86")
    finish(launch(workflow, alice)[0], m1, 1.0)
    finish(launch(workflow, alice, scheduler="credit")[0], x86, 0.5)
    url = f"/platforms/compare/?workflow={workflow.pk}&platforms={m1.pk}&platforms={x86.pk}"
    page = client.get(url).content.decode()
    assert page.count('<th><a href="/platforms/') == 2
    assert (
        f'href="?workflow={workflow.pk}&amp;platforms={m1.pk}&amp;platforms={x86.pk}&amp;scheduler=credit"'
        in page
    )
    only = client.get(f"{url}&scheduler=credit").content.decode()
    assert only.count('<th><a href="/platforms/') == 1 and "credit · 1 run" in only
