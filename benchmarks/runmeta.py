"""What a run carries besides its workflow: commit, branch, CI job URL, tags and free notes.

The one home of the rules for these fields (lengths, the URL scheme, the tag charset) and of the
``key=value`` words of ``consumerbench submit --meta``; the server checks what the API and the launch
form receive with the same function (docs/api.md, "Run metadata"). Standard library only.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_COMMIT = 64  # a SHA-256 object name; a short SHA-1 has at least 4 hex digits
MAX_BRANCH = 200
MAX_CI_URL = 500
MAX_TAG = 64
MAX_TAGS = 20
MAX_NOTES = 2000

COMMIT_RE = re.compile(r"[0-9a-f]{4,64}")
# Branch names as git allows them in practice, without spaces, control characters or git's own
# specials (~ ^ : ? * [ \): enough for "main", "feature/x-1", "release/2.0", "dependabot/pip/x".
BRANCH_RE = re.compile(r"[A-Za-z0-9._/@+-]{1,200}")
TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}")
TAG_RULE = "1-64 characters of letters, digits and . _ : + -, starting with a letter or digit"

# ``submit --meta KEY=VALUE``: KEY is one of these; tag= and note= may repeat (tags add up, notes
# are joined by new lines).
META_KEYS = {"commit": "commit", "branch": "branch", "ci_url": "ci_url", "tag": "tags", "note": "notes"}


class MetaError(ValueError):
    """Run metadata that breaks a rule; ``problems`` holds (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{f}: {m}" for f, m in problems))


@dataclass(frozen=True)
class RunMeta:
    commit: str = ""
    branch: str = ""
    ci_url: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    notes: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as the API sends them (tags as a list)."""
        return {
            "commit": self.commit,
            "branch": self.branch,
            "ci_url": self.ci_url,
            "tags": list(self.tags),
            "notes": self.notes,
        }


def check_meta(data: Mapping[str, Any]) -> RunMeta:
    """Return the checked metadata of ``data`` (keys commit, branch, ci_url, tags, notes; each
    optional); raise MetaError naming every field that breaks a rule, or any unknown key.

    A commit is stored in lower case; tags lose duplicates, keeping their order.
    """
    problems: list[tuple[str, str]] = []
    unknown = sorted(set(data) - {"commit", "branch", "ci_url", "tags", "notes"})
    problems += [(key, "unknown field (commit, branch, ci_url, tags, notes)") for key in unknown]

    def text(name: str, limit: int) -> str:
        value = data.get(name, "")
        if value is None:
            return ""
        if not isinstance(value, str):
            problems.append((name, "must be a string"))
            return ""
        if len(value) > limit:
            problems.append((name, f"at most {limit} characters (got {len(value)})"))
            return ""  # its other rules are moot
        return value.strip()

    commit = text("commit", MAX_COMMIT).lower()
    if commit and not COMMIT_RE.fullmatch(commit):
        problems.append(("commit", "a git object name: 4-64 hexadecimal digits"))
    branch = text("branch", MAX_BRANCH)
    if branch and (not BRANCH_RE.fullmatch(branch) or ".." in branch):
        problems.append(("branch", "letters, digits and . _ / @ + - only, without '..'"))
    ci_url = text("ci_url", MAX_CI_URL)
    if ci_url:
        problems += [("ci_url", p) for p in _url_problems(ci_url)]
    notes = text("notes", MAX_NOTES)
    tags = _check_tags(data.get("tags") or [], problems)
    if problems:
        raise MetaError(problems)
    return RunMeta(commit=commit, branch=branch, ci_url=ci_url, tags=tags, notes=notes)


def _url_problems(url: str) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return ["must be an http:// or https:// URL"]
    if not parts.netloc or any(c.isspace() or ord(c) < 32 for c in url):
        return ["must be a URL with a host and no spaces"]
    return []


def _check_tags(value: Any, problems: list[tuple[str, str]]) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        problems.append(("tags", "must be a list of tags"))
        return ()
    tags: list[str] = []
    for tag in value:
        if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
            problems.append(("tags", f"{str(tag)[:80]!r} is not a tag: {TAG_RULE}"))
        elif tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        problems.append(("tags", f"at most {MAX_TAGS} tags (got {len(tags)})"))
    return tuple(tags)


def parse_meta_args(words: Iterable[str]) -> dict[str, Any]:
    """Return the metadata mapping of ``--meta KEY=VALUE`` words (commit=, branch=, ci_url=, tag=,
    note=); raise MetaError for a word without ``=`` or an unknown key. Values are checked by
    ``check_meta``."""
    out: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in META_KEYS:
            problems.append(
                ("--meta", f"{word!r}: expected KEY=VALUE with KEY one of {', '.join(META_KEYS)}")
            )
            continue
        name = META_KEYS[key]
        if name == "tags":
            out.setdefault("tags", []).append(value)
        elif name == "notes" and "notes" in out:
            out["notes"] += "\n" + value
        else:
            out[name] = value
    if problems:
        raise MetaError(problems)
    return out
