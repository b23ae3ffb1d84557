"""Long hostile inputs get a clear verdict and a bounded one (timings are in
benchmarks/bench_policy_worst.py and BENCHMARKS.md, never asserted here).

The inputs are the ones that took seconds before: 16 KB of line continuations (each word
was tested against each continuation seam), 16,000 ``;`` (one finding each).
"""

from __future__ import annotations

from support.policy_paths import allowlist_named

from agent_eval.policy import check_command, judge_command
from agent_eval.policy.engine import MAX_FINDINGS
from agent_eval.policy.syntax import PER_RULE

RALF = allowlist_named("ralf")
CALENDAR = "uv run scripts/calendar.py create --title t --start s"


def test_sixteen_kilobytes_of_line_continuations_between_words():
    command = ("x \\\n" * 4096)[:16384]
    verdict = judge_command(command, RALF)
    assert (verdict.decision, verdict.primary) == ("deny", "AE307")


def test_a_long_allowed_command_with_continuations_is_still_judged_word_by_word():
    command = CALENDAR + " --attendee a\\\n" * 1000
    assert len(command) < RALF.strict.max_length
    verdict = judge_command(command, RALF)
    assert verdict.allowed
    assert len(dict(verdict.invocation.flags)["--attendee"]) == 1000
    # a continuation inside the program name still makes it a spelled program
    assert judge_command("l\\\ns " + "a \\\n" * 3000, RALF).primary == "AE307"


def test_sixteen_thousand_semicolons_keep_a_bounded_list_of_findings():
    verdict = judge_command(";" * 16000, RALF)
    assert verdict.primary == "AE313"
    assert len(verdict.findings) <= MAX_FINDINGS
    assert "more findings" in verdict.findings[-1].message


def test_the_primary_code_is_chosen_from_every_finding_not_the_kept_ones():
    """The heredoc comes after thousands of chains, yet outranks them."""
    command = "a;" * 4000 + "cat <<EOF\nx\nEOF"
    verdict = check_command(command, RALF)
    assert verdict.primary == "AE305"
    assert len(verdict.findings) <= MAX_FINDINGS
    assert "AE305" in {f.code for f in verdict.findings}


def test_one_rule_keeps_at_most_its_cap_of_findings_per_command():
    verdict = judge_command("uv run scripts/db_query.py --sql x" + " --v" * 3000, RALF)
    assert verdict.primary == "AE310"
    assert sum(f.code == "AE310" for f in verdict.findings) <= PER_RULE + 1
