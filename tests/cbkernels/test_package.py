import importlib.metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_top_level_package_of_the_project_shadows_an_installed_distribution():
    # transformers 5 imports Hugging Face's `kernels` when it finds one; a project folder of that name at
    # the repository root (first on sys.path under pytest and PYTHONPATH=.) broke every Whisper load.
    ours = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert {"benchmarks", "cbkernels", "workers", "cbweb"} <= ours
    owners = importlib.metadata.packages_distributions()
    clashes = {name: owners[name] for name in ours if set(owners.get(name, [])) - {"consumerbench"}}
    assert clashes == {}
