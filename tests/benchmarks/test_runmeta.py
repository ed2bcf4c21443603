"""Run metadata rules: commit, branch, CI URL, tags, notes, and `--meta KEY=VALUE` words."""

from __future__ import annotations

import pytest

from benchmarks.runmeta import MAX_NOTES, MAX_TAGS, MetaError, check_meta, parse_meta_args


def _problems(data: dict[str, object]) -> dict[str, str]:
    with pytest.raises(MetaError) as info:
        check_meta(data)
    return dict(info.value.problems)


def test_good_metadata_is_kept_with_the_commit_lowercased_and_tags_deduplicated() -> None:
    meta = check_meta(
        {
            "commit": "ABCDEF0123",
            "branch": "feature/x-1",
            "ci_url": "https://ci.example.org/job/1",
            "tags": ["nightly", "v1.2", "nightly"],
            "notes": "after the driver update",
        }
    )
    assert meta.as_dict() == {
        "commit": "abcdef0123",
        "branch": "feature/x-1",
        "ci_url": "https://ci.example.org/job/1",
        "tags": ["nightly", "v1.2"],
        "notes": "after the driver update",
    }
    assert check_meta({}).as_dict()["tags"] == []


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"commit": "xyz123"}, "commit", "hexadecimal"),
        ({"commit": "a" * 65}, "commit", "at most 64"),
        ({"branch": "a b"}, "branch", "letters, digits"),
        ({"branch": "a..b"}, "branch", "'..'"),
        ({"ci_url": "javascript:alert(1)"}, "ci_url", "http:// or https://"),
        ({"ci_url": "ftp://example.org/x"}, "ci_url", "http:// or https://"),
        ({"ci_url": "https://"}, "ci_url", "host"),
        ({"tags": ["ok", "<script>"]}, "tags", "not a tag"),
        ({"tags": "one-string"}, "tags", "list"),
        ({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, "tags", "at most 20"),
        ({"notes": "x" * (MAX_NOTES + 1)}, "notes", "at most 2000"),
        ({"notes": 5}, "notes", "string"),
        ({"owner": "me"}, "owner", "unknown field"),
    ],
)
def test_each_broken_rule_names_its_field(data: dict[str, object], field: str, words: str) -> None:
    assert words in _problems(data)[field]


def test_meta_words_map_to_fields_and_tags_and_notes_repeat() -> None:
    words = ["commit=abc1234", "branch=main", "ci_url=https://ci/1", "tag=a", "tag=b", "note=x", "note=y=z"]
    assert parse_meta_args(words) == {
        "commit": "abc1234",
        "branch": "main",
        "ci_url": "https://ci/1",
        "tags": ["a", "b"],
        "notes": "x\ny=z",
    }


def test_unknown_meta_keys_and_words_without_equals_are_errors() -> None:
    with pytest.raises(MetaError) as info:
        parse_meta_args(["owner=me", "tag"])
    assert [f for f, _ in info.value.problems] == ["--meta", "--meta"]
    assert "'owner=me'" in str(info.value) and "commit, branch, ci_url, tag, note" in str(info.value)
