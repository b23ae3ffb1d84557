"""Captured agent-CLI exchanges (tests/fixtures/clis/<cli>/exchanges) as the relay hands
them to the recorder: request bytes, the session headers the relay keeps, the answer's
status, content type and bytes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_eval.policy import load_allowlist
from agent_eval.proxy.relay import SESSION_HEADERS, Exchange

CLIS = Path(__file__).resolve().parents[1] / "fixtures" / "clis"
ALLOWLIST = CLIS / "allowlist.yaml"
T0 = datetime(2026, 11, 26, tzinfo=UTC)
# the scripted upstream's subagent prompt (tests/interop/clis/upstream.py SUBAGENT_PROMPT);
# Claude Code's captures replace its prose, this prompt among it, by length and hash
SUBAGENT_PROMPT = ("SUBAGENT TASK: list the files of the project folder with one shell "
                   "command (`echo subagent shell call`), then answer with one sentence.")


def _unredact(body: bytes) -> bytes:
    """The capture with the subagent prompt put back where its hash says it was."""
    digest = hashlib.sha256(SUBAGENT_PROMPT.encode()).hexdigest()[:16]
    mark = f"[Claude Code text: {len(SUBAGENT_PROMPT)} chars, sha256 {digest}]"
    return body.replace(json.dumps(mark).encode(), json.dumps(SUBAGENT_PROMPT).encode())


def allowlist():
    return load_allowlist(ALLOWLIST)


def exchanges(cli: str) -> list[Exchange]:
    out = []
    for n, request in enumerate(sorted((CLIS / cli / "exchanges").glob("*.request.json"))):
        meta = json.loads(request.with_name(request.name.replace("request.json",
                                                                  "meta.json")).read_text())
        answer = next(request.parent.glob(request.name.replace("request.json", "response.*")))
        kind = dict((k.lower(), v) for k, v in meta["response_headers"]).get("content-type", "")
        headers = {k.lower(): v for k, v in meta["request_headers"]
                   if k.lower() in SESSION_HEADERS}
        out.append(Exchange(
            path=meta["target"].split("?")[0], request_body=_unredact(request.read_bytes()),
            session_headers=headers, started_at=T0 + timedelta(seconds=n),
            status=meta["status"], content_type=kind,
            response_body=bytearray(answer.read_bytes()), ttft_s=0.01, latency_s=0.02))
    return out
