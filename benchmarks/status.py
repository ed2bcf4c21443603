"""Every status word of ConsumerBench, in one place (docs/result-format.md, docs/api.md).

String enums: each member is its ``str`` value, so JSON, CSV, the database and templates see the
same words as before. Four vocabularies, kept apart because they describe different things:

- ``RunStatus``: a run of the engine (``running``, then how it ended: ``result.json``'s ``status``);
- ``NodeStatus``: a DAG node's life cycle (the runner, the progress reducer, ``nodes[].status``);
- ``RequestStatus``: how one request ended (``requests[].status``);
- ``JobStatus``: a run on a ConsumerBench server (the web's ``Run.status``, the REST API, the client).

Standard library only: the bottom of the engine, importable by every layer and by the API client.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run of the engine: ``running`` (its ``run_status`` event), then how it ended."""

    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


class NodeStatus(StrEnum):
    """A DAG node's status: ``pending``, then ``running`` (the progress reducer shows ``loading`` until
    its model is loaded), ``stopping`` while asked to stop, and one of the four terminal statuses."""

    PENDING = "pending"
    LOADING = "loading"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        """True for the statuses a node ends with (the only ones a result holds)."""
        return self in TERMINAL

    @property
    def failing(self) -> bool:
        """True when the node did not do its work: it failed, or was skipped (a dependency failed, the
        run was cancelled or stopped before it started). A stopped background node did its work."""
        return self in FAILING


TERMINAL = frozenset({NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.STOPPED, NodeStatus.SKIPPED})
FAILING = frozenset({NodeStatus.FAILED, NodeStatus.SKIPPED})


class RequestStatus(StrEnum):
    """How one request ended: served, cut short by a stop, or failed with an error."""

    OK = "ok"
    INTERRUPTED = "interrupted"
    ERROR = "error"


class JobStatus(StrEnum):
    """A run's status on a ConsumerBench server: ``queued``, ``running``, then a finished one."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """True once the run has ended (it never changes status again)."""
        return self in FINISHED


FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
