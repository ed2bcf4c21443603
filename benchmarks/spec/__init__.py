"""The workflow specification.

- ``model``: the canonical pydantic types (``Workflow``, ``Application``, ``Node``, ``SLO``,
  ``Arrival``), errors and limits; their validators enforce the DAG rules. Imports nothing from
  the engine, so every layer may use it.
- ``graph``: which nodes run after which and which may run at the same time.
- ``load``: the dialects (``dialects``) and YAML with line numbers (``yaml_text``) into a ``Workflow``,
  checked against the application and scheduler registries and the input limits.
- ``export``: canonical mapping and YAML of a workflow.

Nothing is re-exported here: importing ``benchmarks.spec.model`` must not load the loader.
"""
