import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_top_level_package_of_the_project_shadows_an_installed_distribution():
    # transformers 5 imports Hugging Face's `kernels` when it finds one; a project folder of that name at
    # the repository root (first on sys.path under pytest and PYTHONPATH=.) broke every Whisper load.
    import transformers.utils.import_utils as hf

    spec = importlib.util.find_spec("kernels")
    assert spec is None or Path(spec.origin or "").parent != ROOT / "kernels"
    hf.is_kernels_available.cache_clear()
    assert hf.is_kernels_available() in (True, False)
