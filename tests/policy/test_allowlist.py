"""Allow-list files: validation errors name the file and the field; `extends` layers a
looser harness on a base one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy import check_command, load_allowlist

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        pytest.param("scripts: {a.py: {flags: {--n: {value: true, type: int, choices: [a]}}}}",
                     "scripts.a.py.flags.--n", "choice 'a' is not an int", id="choice-vs-type"),
        pytest.param("scripts: {a.py: {flags: {--n: {choices: [a, b]}}}}",
                     "scripts.a.py.flags.--n", "needs `value: true`", id="bare-flag-choices"),
        pytest.param("scripts: {a.py: {flags: {--n: {valu: true}}}}",
                     "scripts.a.py.flags.--n.valu", "unknown field", id="unknown-field"),
        pytest.param("scripts: {a.py: {flags: {n: {}}}}",
                     "scripts.a.py.flags", "must start with '-'", id="flag-without-dash"),
        pytest.param("extends: nowhere.yaml", "extends", "not found", id="missing-base"),
        pytest.param("extends: [a]", "extends", "path of another allow-list", id="bad-extends"),
        pytest.param("tools: [{name: sh, kind: [bash]}]", "tools.0.kind",
                     "Input should be 'bash', 'read' or 'other'", id="tool-kind-not-a-string"),
    ],
)
def test_a_bad_allowlist_names_the_file_the_field_and_the_fix(tmp_path, text, field, message):
    path = write(tmp_path, "bad.yaml", "name: bad\n" + text + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        load_allowlist(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert field in str(caught.value) and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_extends_cycle_is_refused(tmp_path):
    write(tmp_path, "a.yaml", "name: a\nextends: b.yaml\n")
    write(tmp_path, "b.yaml", "name: b\nextends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_allowlist(tmp_path / "a.yaml")


def test_extends_merges_scripts_by_name_and_strict_by_key(tmp_path):
    write(tmp_path, "base.yaml", """name: base
scripts:
  a.py: {flags: {--x: {value: true}}}
  b.py: {}
  c.py: {}
strict: {pipe_to: [head], allow_chain: false}
""")
    child = write(tmp_path, "child.yaml", """name: child
extends: base.yaml
scripts:
  a.py: {flags: {--y: {}}}
  c.py: null
  d.py: {}
strict: {allow_chain: true}
""")
    merged = load_allowlist(child)
    assert merged.name == "child" and merged.extends == "base.yaml"
    assert sorted(merged.scripts) == ["a.py", "b.py", "d.py"]
    assert list(merged.scripts["a.py"].flags) == ["--y"]  # an entry replaces, not merges
    assert merged.strict.pipe_to == ["head"] and merged.strict.allow_chain is True


def test_permissive_extends_ralf_with_every_ralf_script():
    ralf = load_allowlist(ROOT / "allowlists" / "ralf.yaml")
    permissive = load_allowlist(ROOT / "allowlists" / "permissive.yaml")
    assert set(ralf.scripts) <= set(permissive.scripts)
    command = "uv run scripts/update_stage_status.py --stage S1 --status awaiting_eval | head -n 5"
    assert check_command(command, ralf).primary == "AE301"
    assert check_command(command, permissive).decision == "allow"
