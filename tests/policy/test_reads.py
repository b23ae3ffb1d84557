"""Read paths as any file system, URL decoder, shell or editor means them.

Every path here was allowed under ``allowlists/ralf.yaml`` (roots notes/ docs/ scratch/
reports/, blocked notes/private/, .env, secrets/) before these spellings were refused.
"""

from __future__ import annotations

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import allowlist_from_dict, check_read

RALF = allowlist_named("ralf")


@pytest.mark.parametrize(("path", "why"), [
    ("docs/%2eenv", "percent-encoded"),
    ("docs/%2Eenv", "percent-encoded"),
    ("docs/%252eenv", "percent-encoded"),
    ("notes%2fprivate/diary.md", "percent-encoded"),
    ("notes/private%252fdiary.md", "percent-encoded"),
    ("notes/%u0070rivate/diary.md", "percent-encoded"),
    ("docs/.env::$DATA", "data stream"),
    ("docs/.env:secret", "data stream"),
    ("notes/private::$INDEX_ALLOCATION/diary.md", "data stream"),
    ("notes/PRIVAT~1/diary.md", "8.3 short name"),
    ("docs/.env~", "editor backup"),
    ("docs/*env", "glob"),
    ("docs/.en?", "glob"),
    ("docs/.e[n]v", "glob"),
    ("notes/{private,x}/diary.md", "glob"),
    ("notes/$(cat id)", "glob or shell"),
    ("notes/`id`", "glob or shell"),
    ("docs/#.env#", "glob or shell"),
    ("docs/.#.env", "glob or shell"),
    ("notes/a;b.md", "glob or shell"),
    ("notes/plan.md\u00a0", "whitespace"),
], ids=repr)
def test_a_spelling_some_reader_opens_as_another_file_is_refused(path, why):
    verdict = check_read(path, RALF)
    assert verdict.primary == "AE320"
    assert why in verdict.findings[0].message


@pytest.mark.parametrize("path", [
    "docs/.env\t", "docs/.env\n", "notes/pri\tvate/diary.md", "notes/private\n/diary.md",
    "notes/plan.md\r",
], ids=repr)
def test_tab_and_line_feed_in_a_path_are_invalid_bytes(path):
    assert check_read(path, RALF).primary == "AE202"


@pytest.mark.parametrize("path", [
    "notes/prıvate/diary.md",        # dotless ı: PRIVATE to a file system that upper-cases
    "docs/.ENV",
    "notes/ｐrivate/diary.md",       # fullwidth p: NFKC
    "docs/ｓecrets/k",
    "docs/ſecrets/k",               # long s: S when upper-cased
    "docs/.env.swp",
], ids=repr)
def test_blocked_names_match_through_case_mappings_and_compatibility_forms(path):
    assert check_read(path, RALF).primary == "AE320"


def test_editor_copies_of_a_blocked_file_are_blocked():
    policy = allowlist_from_dict({"name": "x", "read": {"roots": ["notes/"],
                                                        "blocked": ["secrets.txt"]}})
    for path in ("notes/.secrets.txt.swp", "notes/secrets.txt.swo", "notes/secrets.txt.bak"):
        assert check_read(path, policy).primary == "AE320", path
    assert check_read("notes/secrets-policy.md", policy).allowed


@pytest.mark.parametrize("path", [
    "notes/plan.md", "notes/meeting notes.md", "notes/Zoë.md", "notes/50%.md",
    "notes/report (1).md", "docs/environment.md", "notes/privateer.md",
], ids=repr)
def test_ordinary_paths_stay_allowed(path):
    assert check_read(path, RALF).allowed
