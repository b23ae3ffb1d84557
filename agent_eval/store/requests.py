"""The exact request of each turn, kept so the turn can be replayed against another model.

A turn's request is what the client sent for it: the model, the messages before the
reply, the tools, ``tool_choice`` and sampling.  The users' prompts are 30-60k tokens and
every turn of a session repeats all of the previous ones, so storing each request whole
would grow as the square of the session length.  Instead each message (and the tool
list) is stored once, by the SHA-256 of its JSON text, in ``request_blobs``; the turn
keeps a small reference: the list of message hashes, the tools hash and the remaining
fields as they were.  The same system prompt across a night of sessions is one row.

Texts over the store's cap (``caps.py``) are capped here too, so a runaway reply cannot
fill the disk through this door either; such a request is marked ``capped`` and replay
refuses it rather than send a context the model never saw.  Each blob also keeps the day
it was last used (``seen_on``), so a retention setting (``prune_blobs``; the proxy's
``--keep-requests-days``) can bound the table over weeks of traffic.  Pure except
``save_blobs``, ``prune_blobs`` and the loaders.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Dialect, Insert, delete, or_, select

from agent_eval.store.bulk import insert_rows
from agent_eval.store.caps import STORED_TEXT_CHARS, cap_message
from agent_eval.store.schema import request_blobs, sessions, turns

REF_VERSION = 1
"""Bumped when the reference's shape changes."""


def blob_text(value: Any) -> str:
    """The JSON text a blob is stored and hashed as: keys in the order the client sent
    them (the exact request, not a normalised one), no spaces, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def blob_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def split_request(
    request: dict[str, Any], limit: int = STORED_TEXT_CHARS,
    seen: dict[int, tuple[str, bool]] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """``(reference, blobs)`` for one request: the reference goes in the turn's row, the
    blobs (hash → JSON text) in ``request_blobs``.

    ``seen`` (message object id → (hash, capped)) lets the writer of a batch capping,
    serialising and hashing each message object once, not once per turn that sent it:
    the turns of one session share their messages' objects (``transcript.share_messages``)
    and stay alive while the batch is written, so an id names one message.  Blobs of a
    message found in ``seen`` were returned with the request that first held it."""
    blobs: dict[str, str] = {}
    capped = False

    def put(value: Any) -> str:
        nonlocal capped
        known = seen.get(id(value)) if seen is not None else None
        if known is not None:
            capped = capped or known[1]
            return known[0]
        text = blob_text(value)
        cut = False
        # a string longer than the cap is longer still as JSON: a short text has none
        if len(text) > limit and (short := cap_message(value, limit)) != value:
            text, cut = blob_text(short), True
        digest = blob_hash(text)
        blobs.setdefault(digest, text)
        if seen is not None:
            seen[id(value)] = (digest, cut)
        capped = capped or cut
        return digest

    ref: dict[str, Any] = {"v": REF_VERSION}
    for key, value in request.items():
        if key == "messages" and isinstance(value, list):
            ref["messages"] = [put(m) for m in value]
        elif key == "tools" and value is not None:
            ref["tools"] = put(value)
        else:
            cut = cap_message(value, limit)
            capped = capped or cut != value
            ref.setdefault("fields", {})[key] = cut
    if capped:
        ref["capped"] = True
    return ref, blobs


def join_request(ref: dict[str, Any], blobs: dict[str, str]) -> dict[str, Any]:
    """The request a reference stands for; ``KeyError`` names a blob that is missing."""
    request: dict[str, Any] = {}
    fields = ref.get("fields", {})
    # the order the client sent: model and sampling fields around messages and tools
    for key, value in fields.items():
        request[key] = value
    if "messages" in ref:
        request["messages"] = [json.loads(blobs[h]) for h in ref["messages"]]
    if "tools" in ref:
        request["tools"] = json.loads(blobs[ref["tools"]])
    return request


def save_blobs(conn: Connection, blobs: dict[str, str], today: date | None = None) -> None:
    """Insert the blobs not stored yet and mark every one of them seen ``today`` (UTC by
    default).  A blob already there is only rewritten when it was last seen on an earlier
    day, so a shared 50k-token prompt costs one small update a day, not one a turn.  Two
    writers storing the same prompt at once are fine: a hash already there is not an
    error."""
    if not blobs:
        return
    today = today or datetime.now(UTC).date()
    insert_rows(conn, request_blobs,
                [{"hash": h, "body": text, "seen_on": today} for h, text in blobs.items()],
                _blob_upsert)


def _blob_upsert(dialect: Dialect) -> Insert:
    """``INSERT ... ON CONFLICT (hash) DO UPDATE SET seen_on`` where it was older (SQLite
    and PostgreSQL, the two stores, share the form)."""
    if dialect.name == "postgresql":  # each dialect's module loads with its store only
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        upsert: Any = pg_insert(request_blobs)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        upsert = sqlite_insert(request_blobs)
    return upsert.on_conflict_do_update(
        index_elements=["hash"], set_={"seen_on": upsert.excluded.seen_on},
        where=or_(request_blobs.c.seen_on.is_(None),
                  request_blobs.c.seen_on < upsert.excluded.seen_on))


def prune_blobs(conn: Connection, keep_days: int, today: date | None = None) -> int:
    """Delete the blobs no turn stored or used in the last ``keep_days`` days (today
    counts as one); the number deleted.  Every turn stored within that window keeps its
    whole request; an older turn may lose it, and then reads as pruned
    (``load_requests`` leaves it out, ``run_request_refs`` marks it) instead of failing."""
    if keep_days < 1:
        raise ValueError("keep_days must be at least 1")
    today = today or datetime.now(UTC).date()
    cutoff = today - timedelta(days=keep_days - 1)
    return conn.execute(
        delete(request_blobs).where(request_blobs.c.seen_on < cutoff)).rowcount or 0


def load_blobs(conn: Connection, hashes: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(hashes))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update(conn.execute(
            select(request_blobs.c.hash, request_blobs.c.body)
            .where(request_blobs.c.hash.in_(chunk))
        ).all())
    return found


def ref_hashes(ref: dict[str, Any]) -> list[str]:
    return list(ref.get("messages", [])) + ([ref["tools"]] if "tools" in ref else [])


@dataclass(frozen=True, slots=True)
class StoredRequest:
    """A turn's request as stored; ``capped`` when a text in it was cut to the store's cap
    (then it is not the exact context any more)."""

    request: dict[str, Any]
    capped: bool
    protocol: str | None = None  # the session's wire protocol (None: Chat Completions)


def load_requests(conn: Connection, session_id: int) -> dict[int, StoredRequest]:
    """Each turn's request (turn index → request) for one session; turns stored without
    one (imports, sessions stored before requests were kept) are absent, and so are turns
    whose texts the retention setting pruned (``prune_blobs``)."""
    rows = conn.execute(
        select(turns.c.index, turns.c.request).where(turns.c.session_id == session_id)
    ).all()
    refs = {index: ref for index, ref in rows if ref}  # JSON null or SQL NULL: none kept
    blobs = load_blobs(conn, (h for ref in refs.values() for h in ref_hashes(ref)))
    protocol = conn.execute(select(sessions.c.protocol)
                            .where(sessions.c.id == session_id)).scalar()
    return {index: StoredRequest(join_request(ref, blobs), bool(ref.get("capped")), protocol)
            for index, ref in refs.items() if all(h in blobs for h in ref_hashes(ref))}


def run_request_refs(conn: Connection, run_id: int) -> dict[int, dict[int, dict[str, Any]]]:
    """Every stored request reference of a run (session id → turn index → reference),
    without the blobs: small, so ``replay`` can plan a night of traffic (which turns kept
    their request, which are capped, which lack tools) before loading any prompt.  A
    reference some of whose texts were pruned by the retention setting comes back with
    ``"pruned": True``."""
    rows = conn.execute(
        select(turns.c.session_id, turns.c.index, turns.c.request)
        .join(sessions, sessions.c.id == turns.c.session_id)
        .where(sessions.c.run_id == run_id)
    ).all()
    refs: dict[int, dict[int, dict[str, Any]]] = {}
    for session_id, index, ref in rows:
        if ref:  # JSON null or SQL NULL: none kept
            refs.setdefault(session_id, {})[index] = ref
    wanted = sorted({h for turns_ in refs.values() for ref in turns_.values()
                     for h in ref_hashes(ref)})
    have: set[str] = set()
    for start in range(0, len(wanted), 500):
        have.update(conn.execute(select(request_blobs.c.hash).where(
            request_blobs.c.hash.in_(wanted[start:start + 500]))).scalars())
    if len(have) < len(wanted):
        for turns_ in refs.values():
            for index, ref in turns_.items():
                if not all(h in have for h in ref_hashes(ref)):
                    turns_[index] = {**ref, "pruned": True}
    return refs
