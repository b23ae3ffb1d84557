"""Off the request path: a bounded queue and one writer thread that judges and stores.

The relay hands each finished exchange to :meth:`Recorder.submit` (a ``put_nowait``: a
full queue drops the exchange and counts it, the client never waits).  The writer
thread links and judges exchanges (``sessions.py``), and writes each session to the
store as a run of kind ``proxy`` when it closes (idle timeout, or the proxy stopping).

When the store is down, slow or refuses a write, the closed sessions go to a local
journal file (JSON lines, capped at ``journal_max_bytes``); every ``retry_s`` seconds the
journal is replayed into the store, and emptied once written.  What neither the queue nor
the journal could take is counted (``lost_turns``) and shown on the status line and on
``GET /_agent_eval/status``.  A journal left by an earlier proxy is replayed into the
run it was recorded for.

A journal that cannot be written (disk full, ``EFBIG`` past a file size limit) loses
only the sessions of that write: they are counted in ``lost_turns`` and
``journal_errors``, the torn line is cut off again, and recording goes on (into the
store when it answers).  Text no store can hold (a lone surrogate such as a reply's
``"\\ud800"``, which is not UTF-8) reaches it as U+FFFD (``sessions.py`` mends such
records once their calls are judged; a store or journal refusing one anyway gets it
mended), never losing the session.  Nothing raised while recording stops the writer thread.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import EllipsisType
from typing import Any

from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.rules import code_for
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.proxy.parity import ParityAnswer, ParityTwins
from agent_eval.proxy.relay import Exchange, public_url
from agent_eval.proxy.sessions import Sessions
from agent_eval.runs import RunSpec, RunWriter, TargetDefaults
from agent_eval.scenario.protocols import Protocols
from agent_eval.transcript import (
    STACK_KEY,
    UPSTREAM_STACK,
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    StackFaultRecord,
    TurnRecord,
    storable,
)

log = logging.getLogger("agent_eval.proxy")


@dataclasses.dataclass
class RecorderStats:
    stored_sessions: int = 0
    stored_turns: int = 0
    journaled_sessions: int = 0
    lost_turns: int = 0  # exchanges the queue dropped + turns the journal could not take
    journal_errors: int = 0  # journal writes or reads the file system refused
    pruned_request_texts: int = 0  # request texts deleted by the retention setting
    truncations: int = 0  # calls of kept sessions the stack cut at max_tokens (AE501)
    parity_twins: int = 0  # whole twins of streamed turns asked of the upstream (AE510)
    parity_lost: int = 0  # twins' answers the full queue dropped
    store_errors: int = 0
    last_store_error: str | None = None


class Recorder:
    """One proxy run's writer: ``start()``, ``submit()`` from the loop, ``stop()``."""

    def __init__(self, store: Any, allowlist: AllowList | ResolvedPolicy, *, upstream: str,
                 label: str | None = None, allowlist_path: str | None = None,
                 idle_s: float = 600.0, queue_size: int = 1024,
                 journal: str | Path = "agent-eval-proxy.journal",
                 journal_max_bytes: int = 1024 * 1024 * 1024, retry_s: float = 5.0,
                 tick_s: float = 0.5, protocols: Protocols | None = None,
                 protocols_path: str | None = None, keep_requests_days: int = 0,
                 prune_every_s: float = 3600.0, stack_notes: Mapping[str, str] | None = None,
                 ask_upstream: bool = True, stream_parity: bool = False) -> None:
        """``keep_requests_days``: delete the stored request texts (the prompts kept for
        ``replay``) that no turn used in that many days, at start and every
        ``prune_every_s`` seconds; 0 keeps them for ever.  ``stack_notes``: the operator's
        notes on the upstream's stack (``parser``, ``template``...); at :meth:`start` the
        upstream is asked once what it serves (``upstream.py``; ``ask_upstream`` False:
        never), kept in the run's fingerprint and read for AE511.  ``stream_parity``: ask
        the upstream the whole twin of each streamed turn whose decoding repeats itself,
        after it was relayed, and read the pair for AE510 (``parity.py``)."""
        self.store = store
        self.protocols_path = protocols_path
        self.policy: ResolvedPolicy | None = None
        self.allowlist: AllowList
        if isinstance(allowlist, ResolvedPolicy):
            self.policy, self.allowlist = allowlist, allowlist.allowlist
        else:
            self.allowlist = allowlist
        self.label = label
        self.upstream = public_url(upstream)  # stored in the run's config: no credentials
        self.stack_notes = dict(stack_notes or {})
        self.ask_upstream = ask_upstream
        self.stream_parity = stream_parity
        self.parity: ParityTwins | None = None  # started with the writer (start())
        self.allowlist_path = allowlist_path
        self.sessions = Sessions(allowlist, idle_s=idle_s, protocols=protocols)
        self.queue: queue.Queue[Exchange | ParityAnswer | None] = queue.Queue(maxsize=queue_size)
        self.journal = Path(journal)
        self.journal_max_bytes = journal_max_bytes
        self.retry_s = retry_s
        self.tick_s = tick_s
        self.stats = RecorderStats()
        self.run = RunWriter(store, RunSpec(
            kind="proxy", label=label or "proxy", suite=None,
            config={"upstream": self.upstream, "allowlist": self.allowlist.name,
                    "allowlist_path": allowlist_path,
                    "policy_agent": self.policy.agent_name if self.policy is not None
                    and self.policy.via == "option" else None,
                    "protocols_path": protocols_path,
                    "idle_timeout_s": self.sessions.linker.idle_s,
                    "session_rule": "linking.py: client-id, retry, continuation, "
                                    "call-ids, prefix, new"},
            fingerprint={"allowlist": self.allowlist.fingerprint,
                         "engine_version": ENGINE_VERSION, "source": "proxy"},
        ), targets=self._target_defaults)
        self._earlier_runs: dict[int, RunWriter] = {}  # runs a left journal was recorded for
        self._thread = threading.Thread(target=self._work, name="agent-eval-proxy-writer",
                                        daemon=True)
        self._last_retry = self._last_expiry = 0.0
        self.keep_requests_days = keep_requests_days
        self.prune_every_s = prune_every_s
        self._last_prune: float | None = None

    @property
    def run_id(self) -> int | None:
        """The proxy's run, once created (the store may be down at start)."""
        return self.run.run_id

    @property
    def _target_defaults(self) -> TargetDefaults:
        return TargetDefaults(base_url=self.upstream, settings={"source": "proxy"})

    # the event loop's side

    def submit(self, exchange: Exchange) -> bool:
        """Queue an exchange; False (and counted as lost) when the queue is full."""
        try:
            self.queue.put_nowait(exchange)
        except queue.Full:
            self.stats.lost_turns += 1
            return False
        return True

    def status(self) -> dict[str, Any]:
        s = self.stats
        return {"run_id": self.run_id, "open_sessions": self.sessions.open_count,
                "stored_sessions": s.stored_sessions, "stored_turns": s.stored_turns,
                "journaled_sessions": s.journaled_sessions, "lost_turns": s.lost_turns,
                "unparseable_requests": self.sessions.unparseable,
                "queued": self.queue.qsize(), "store_errors": s.store_errors,
                "journal_errors": s.journal_errors,
                "pruned_request_texts": s.pruned_request_texts,
                "truncations": s.truncations,
                "parity_twins": s.parity_twins,
                "parity_skipped": sum(self.sessions.parity_skipped.values()),
                **protocol_counts(self.sessions.counts)}

    def start(self) -> None:
        self._read_upstream()
        if self.stream_parity:
            from yarl import URL

            self.parity = ParityTwins(str(URL(self.upstream).origin()), self._parity_answer)
        self._ensure_run()
        self._thread.start()

    def _read_upstream(self) -> None:
        """Ask the upstream once, before anything is relayed, what stack it serves
        (``upstream.py``): its template's call format judges markup left in replies,
        the stack goes in the run's fingerprint.  No user traffic is touched."""
        from agent_eval.proxy.upstream import upstream_stack

        found = upstream_stack(self.upstream, self.stack_notes, ask=self.ask_upstream)
        self.sessions.template_markers = found.markers
        if found.stack and self.run.spec is not None and self.run.run_id is None:
            self.run.spec.fingerprint[STACK_KEY] = {UPSTREAM_STACK: found.stack}

    def stop(self, timeout: float = 60.0) -> None:
        """Drain the queue, close every open session, write (or journal) them."""
        self.queue.put(None)
        self._thread.join(timeout)

    # the writer thread

    def _work(self) -> None:
        while True:
            item: Exchange | ParityAnswer | EllipsisType | None  # ...: no exchange within a tick
            try:
                item = self.queue.get(timeout=self.tick_s)
            except queue.Empty:
                item = ...
            if item is None:
                break
            try:
                self._step(item, time.monotonic())
            except Exception:  # a bug here must never stop the recording of what follows
                log.exception("the proxy's recorder failed a step; recording goes on")
        self._drain_parity()
        self._write(self.sessions.close_all())
        self._replay_journal()
        if self.run_id is not None and not self.journal.exists():
            self._safely(lambda: self.run.set_status("finished"))

    def _step(self, item: Exchange | Any, now: float) -> None:
        if isinstance(item, Exchange):
            try:
                self.sessions.take(item, now)
                if self.parity is not None:
                    self._twin()
            except Exception:  # a judging bug must never stop the writer
                log.exception("could not record an exchange")
                self.stats.lost_turns += 1
        elif isinstance(item, ParityAnswer):
            try:
                self.sessions.parity(item)
            except Exception:
                log.exception("could not read a stream-parity twin")
        if now - self._last_expiry >= self.tick_s:  # a scan of the open sessions
            self._last_expiry = now
            self._write(self.sessions.expire(now))
        if self.journal.exists() and now - self._last_retry >= self.retry_s:
            self._last_retry = now
            self._replay_journal()
        self._prune(now)

    def _twin(self) -> None:
        """Ask the whole twin of the streamed turn just taken, when it has one."""
        assert self.parity is not None
        twin = self.sessions.parity_twin(ready=self.parity.ready)
        if twin is not None:
            self.stats.parity_twins += 1
            self.parity.ask(*twin)

    def _parity_answer(self, answer: ParityAnswer) -> None:
        """From the parity thread: the answer goes through the writer's own queue."""
        try:
            self.queue.put_nowait(answer)
        except queue.Full:
            self.stats.parity_lost += 1

    def _drain_parity(self, timeout: float = 30.0) -> None:
        """At stop: wait for the twin in flight (at most ``timeout``), then read every
        answer still queued before the sessions close."""
        if self.parity is None:
            return
        self.parity.stop(timeout)
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, ParityAnswer):
                self.sessions.parity(item)
            elif isinstance(item, Exchange):  # none follows the sentinel; kept all the same
                self.sessions.take(item, time.monotonic())

    def _prune(self, now: float) -> None:
        """Apply the retention setting at start and then every ``prune_every_s``; a store
        that is down is tried again at the next turn of the loop."""
        if self.keep_requests_days <= 0 or (
                self._last_prune is not None and now - self._last_prune < self.prune_every_s):
            return

        def prune() -> None:
            self.stats.pruned_request_texts += self.store.prune_requests(
                self.keep_requests_days)

        if self._safely(prune):
            self._last_prune = now

    def _ensure_run(self) -> bool:
        return self.run_id is not None or self._safely(self.run.create)

    def _write(self, records: list[SessionRecord]) -> None:
        """Store ``records``, or journal them; while a journal waits, new sessions join it
        (the replay then stores them), unless it cannot be written; then the store is
        tried.  What neither takes is counted lost."""
        if not records:
            return
        cut = code_for("cut-by-token-limit")  # counted once, whether stored or journaled
        self.stats.truncations += sum(f.code == cut for r in records for f in r.stack_faults)
        journal_first = self.journal.exists()
        if journal_first and self._to_journal(records):
            return
        if self._store(self.run_id, records):
            return
        if not journal_first and self._to_journal(records):
            return
        self.stats.lost_turns += sum(len(r.turns) for r in records)

    def _store(self, run_id: int | None, records: list[SessionRecord]) -> bool:
        if run_id is None and not self._ensure_run():
            return False
        run = self._run_writer(run_id)
        write = run.write

        try:
            write(records)
        except Exception as exc:
            self._note_store_error(exc)
            if is_transient(exc):
                return False
            # the store answered and refused these records: text it cannot hold is
            # mended once; anything else (a duplicate key after a crash mid-replay)
            # retrying cannot help
            mended = [storable(r) for r in records]
            unchanged = all(m is r for m, r in zip(mended, records, strict=True))
            if unchanged or not self._safely(lambda: write(mended)):
                self.stats.lost_turns += sum(len(r.turns) for r in records)
                return True
        self.stats.stored_sessions += len(records)
        self.stats.stored_turns += sum(len(r.turns) for r in records)
        return True

    def _run_writer(self, run_id: int | None) -> RunWriter:
        """The writer of ``run_id``: this proxy's run, or the earlier run a journal left
        by an earlier proxy was recorded for."""
        if run_id is None or run_id == self.run.run_id:
            return self.run
        if run_id not in self._earlier_runs:
            self._earlier_runs[run_id] = RunWriter(self.store, run_id,
                                                   targets=self._target_defaults)
        return self._earlier_runs[run_id]

    def _safely(self, work: Callable[[], object]) -> bool:
        try:
            work()
        except Exception as exc:  # the store is down, slow or refusing: never the traffic's problem
            self._note_store_error(exc)
            return False
        return True

    def _note_store_error(self, exc: Exception) -> None:
        self.stats.store_errors += 1
        text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        self.stats.last_store_error = text
        log.warning("store write failed: %s", text)

    def _to_journal(self, records: list[SessionRecord]) -> bool:
        """One line per batch: a family (a parent and its subagents) stays one write.
        False when the journal cannot take it (full, or the file system refuses: the
        line is cut off again, so the next one starts on a line of its own)."""
        payload = {"run_id": self.run_id, "records": [record_to_json(r) for r in records]}
        try:
            line = (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (sessions.py mends them: a safety net)
            payload["records"] = [record_to_json(storable(r)) for r in records]
            line = (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            size = self.journal.stat().st_size if self.journal.exists() else 0
            if size + len(line) > self.journal_max_bytes:
                return False
            # transcripts: readable by this user only, like the SQLite store it stands in for
            fd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                _write_all(fd, line, size)
            finally:
                os.close(fd)
        except OSError as exc:
            self._note_journal_error(exc)
            return False
        self.stats.journaled_sessions += len(records)
        return True

    def _note_journal_error(self, exc: OSError) -> None:
        self.stats.journal_errors += 1
        log.warning("journal %s not written: %s", self.journal, exc.strerror or exc)
        try:  # a journal left empty would hold back every later session
            if self.journal.exists() and self.journal.stat().st_size == 0:
                self.journal.unlink()
        except OSError:
            pass

    def _replay_journal(self) -> None:
        """Write the journal's sessions to the store; keep what still fails."""
        if not self.journal.exists():
            return
        try:
            lines = self.journal.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            self._note_journal_error(exc)
            return
        kept: list[str] = []
        for i, line in enumerate(lines):
            try:
                entry = json.loads(line)
                records = [record_from_json(r) for r in entry["records"]]
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a crash: nothing to keep
            if not self._store(entry.get("run_id") or self.run_id, records):
                kept.extend(lines[i:])
                break
            self.stats.journaled_sessions = max(0, self.stats.journaled_sessions - len(records))
        try:
            if kept:
                tmp = self.journal.with_suffix(".tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write("\n".join(kept) + "\n")
                tmp.replace(self.journal)
            else:
                self.journal.unlink()
        except OSError as exc:
            self._note_journal_error(exc)


def _write_all(fd: int, data: bytes, size: int) -> None:
    """Append ``data`` to ``fd`` whole, or cut the file back to ``size`` and raise."""
    done = 0
    try:
        while done < len(data):
            done += os.write(fd, data[done:])
    except OSError:
        os.ftruncate(fd, size)
        raise


def protocol_counts(counts: dict[str, Any]) -> dict[str, int]:
    """``recorded_<protocol>`` and ``not_recorded_<protocol>`` for every wire protocol."""
    out: dict[str, int] = {}
    for name, count in counts.items():
        out[f"recorded_{name}"] = count.recorded
        out[f"not_recorded_{name}"] = count.not_recorded
    return out


def by_protocol(status: dict[str, Any]) -> str:
    """The exit line's per-protocol part: ``chat 12 recorded, 0 not; ...`` for every
    protocol that saw an exchange, or ``no exchange of a known protocol``."""
    from agent_eval.wire import PROTOCOLS

    parts = [f"{name} {status.get(f'recorded_{name}', 0)} recorded, "
             f"{status.get(f'not_recorded_{name}', 0)} not"
             for name in PROTOCOLS
             if status.get(f"recorded_{name}", 0) or status.get(f"not_recorded_{name}", 0)]
    return "; ".join(parts) if parts else "no exchange of a known protocol"


def is_transient(exc: BaseException) -> bool:
    """A store that is down or unreachable (try again later), not one refusing the data."""
    from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError, TimeoutError

    return isinstance(exc, OSError | TimeoutError | OperationalError | InterfaceError
                      | DisconnectionError)


def record_to_json(record: SessionRecord) -> dict[str, Any]:
    return dataclasses.asdict(record, dict_factory=_json_dict)


def _json_dict(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in items}


def record_from_json(data: dict[str, Any]) -> SessionRecord:
    """The inverse of :func:`record_to_json`."""
    data = dict(data)
    data["handshake"] = HandshakeResult(**data["handshake"])
    data["turns"] = [TurnRecord(**_dates(t)) for t in data["turns"]]
    data["calls"] = [CallRecord(**dict(c, findings=[FindingRecord(**f) for f in c["findings"]]))
                     for c in data["calls"]]
    # the broken tool schemas the proxy saw (AE512): written by asdict as their fields
    data["stack_faults"] = [StackFaultRecord(**f) for f in data.get("stack_faults") or ()]
    return SessionRecord(**_dates(data))


def _dates(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key in ("started_at", "finished_at"):
        if isinstance(out.get(key), str):
            out[key] = datetime.fromisoformat(out[key])
    return out
