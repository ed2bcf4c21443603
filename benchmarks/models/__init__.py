"""Models: what a unit's ``model:`` names and what was really loaded.

A ``model:`` value is one of

- a catalogue name (``smollm2-135m``, ``whisper-tiny.en``, ``whisper-base``): files that pip packages
  ship, so CPU demos and CI need no network;
- ``NAME@random``: the named architecture built from a config with random weights, which costs the
  same compute as real weights: image models (``sd-tiny``, ``sd3-tiny``, ``sd1.5``, ``sd2.1``,
  ``sdxl``, ``sd3-medium``, ``sd3.5-medium``, ``sd3.5-large``), Whisper for the transformers captions
  backend (``whisper-tiny`` ... ``whisper-large-v3-turbo``) and Llama GGUF chat models written once
  into the cache (``llama-tiny``, ``llama-3.2-1b``, ``llama-3.2-3b``, ``llama-3.1-8b``,
  ``llama-3.1-70b``); any model name whose architecture ``random_twin`` recognises may take
  ``@random`` too (``meta-llama/Llama-3.2-3B-Instruct@random``), which is what ``--weights random``
  writes;
- a local path (a GGUF file, a CTranslate2 folder, a diffusers folder, a transformers folder),
  absolute, relative to the working folder or to a folder of ``CB_MODEL_DIRS``;
- a hub id (``org/name``) found in the local Hugging Face cache (never downloaded).

``resolve`` returns a ``ResolvedModel`` whose ``record()`` is what the result bundle stores (the name,
the file's name and sha256, or ``random`` and the config); a name that cannot be resolved raises
``ModelError`` with one sentence naming the model and how to install it or point to it.

The rooms: ``catalogue`` (the names, packaged and random), ``resolver`` (this package's public face,
re-exported here), ``cache`` (the cache folder and file hashes), and the builders of random weights,
imported only by the drivers that load them: ``random_image`` (diffusers), ``random_whisper``
(transformers Whisper), ``random_llama`` (GGUF).
"""

from benchmarks.models.cache import cache_dir
from benchmarks.models.catalogue import (
    Format,
    ModelError,
    catalogue_names,
    random_substitution,
    random_twin,
    random_weights_name,
)
from benchmarks.models.resolver import (
    Location,
    ModelSearch,
    ResolvedModel,
    check_model,
    describe,
    hub_cache_dir,
    locate,
    model_dirs,
    resolve,
)

__all__ = [
    "Format",
    "Location",
    "ModelError",
    "ModelSearch",
    "ResolvedModel",
    "cache_dir",
    "catalogue_names",
    "check_model",
    "describe",
    "hub_cache_dir",
    "locate",
    "model_dirs",
    "random_substitution",
    "random_twin",
    "random_weights_name",
    "resolve",
]
