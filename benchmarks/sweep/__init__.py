"""Sweeps as data: ``consumerbench sweep SWEEP.yml`` runs base workflows over load levels (overrides
per application type or unit), schedulers and repeats, with an optional break-level search and solo
baselines, in resumable steps; ``--summarize`` writes JSON and Markdown tables and matplotlib plots.

Modules, bottom up: ``model`` (the sweep file), ``state`` (state.json, bundles, archives), ``plan``
(which steps, the walks), ``run`` (running steps within a budget), ``summary``/``markdown``/``plots``
(the outputs), ``cli`` (the sub-command). docs/sweeps.md describes the file format.
"""
