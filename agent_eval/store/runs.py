"""Runs and their targets: creating them, finding them again, and keeping secrets out.

A run is one ``agent-eval run`` (or one import, or one rescore) with the fingerprint that
makes nightly runs comparable.  Its targets carry the model endpoint's settings, scrubbed
of anything that looks like a credential before it reaches the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sqlalchemy import Connection, Engine, Row, and_, exists, insert, not_, or_, select, update

from agent_eval.errors import ConfigError
from agent_eval.metrics.coverage import Coverage, coverage_of, planned_sessions
from agent_eval.store.database import write_transaction
from agent_eval.store.schema import MAX_ID, runs, sessions, targets
from agent_eval.transcript import STACK_FAULT, TRUNCATED

RunKind = Literal["live", "import", "rescore", "replay", "proxy"]
"""``live``: sessions driven against a model server; ``import``: transcripts from another
harness; ``rescore``: an earlier run's calls judged again under a new allow-list;
``replay``: an earlier run's stored contexts sent to a candidate model, each reply paired
with the original turn (``parent_run_id``; live/replay.py); ``proxy``: a real stack's
traffic, recorded and judged by ``agent-eval proxy``."""

RunStatus = Literal["running", "finished", "interrupted", "failed"]
"""``running`` until the run ends; ``finished`` when every session was stored;
``interrupted`` on Ctrl-C (resumable); ``failed`` on a harness fault that stopped it."""

RUN_KINDS: tuple[str, ...] = get_args(RunKind)
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

SECRET_MARKERS = ("key", "token", "secret", "authorization", "password")
NOT_SECRETS = frozenset({"max_tokens", "max_completion_tokens"})
"""Knob names that contain a marker yet are never a credential; kept so runs compare."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    id: int
    label: str | None
    kind: RunKind
    status: RunStatus
    suite: str | None
    created_at: datetime
    finished_at: datetime | None
    config: dict[str, Any]
    fingerprint: dict[str, Any]
    parent_run_id: int | None


@dataclass(frozen=True, slots=True)
class TargetInfo:
    id: int
    run_id: int
    name: str
    model: str
    base_url: str
    settings: dict[str, Any]


def scrub_secrets(value: Any) -> Any:
    """A copy of ``value`` without any mapping key that names a credential, at any depth.

    A key is dropped when its name contains key, token, secret, authorization or password
    (any case), except the token-count knobs in ``NOT_SECRETS``.  Dropping, not masking:
    a masked secret still leaks its length and its presence is not worth a column.
    """
    if isinstance(value, dict):
        return {k: scrub_secrets(v) for k, v in value.items() if not _names_secret(str(k))}
    if isinstance(value, list | tuple):
        return [scrub_secrets(v) for v in value]
    return value


def _names_secret(name: str) -> bool:
    lowered = name.lower()
    return lowered not in NOT_SECRETS and any(m in lowered for m in SECRET_MARKERS)


def create_run(
    engine: Engine,
    *,
    label: str | None,
    kind: str,
    suite: str | None,
    config: dict,
    fingerprint: dict,
    parent_run_id: int | None = None,
) -> int:
    if kind not in RUN_KINDS:
        raise ConfigError(f"unknown run kind {kind!r}: use one of {', '.join(RUN_KINDS)}")
    with write_transaction(engine) as conn:
        if parent_run_id is not None and _run_row(conn, parent_run_id) is None:
            raise ConfigError(f"no run {parent_run_id} to use as the parent run")
        return conn.execute(
            insert(runs).returning(runs.c.id),
            {
                "label": label,
                "kind": kind,
                "status": "running",
                "suite": suite,
                "created_at": datetime.now(UTC),
                "config": scrub_secrets(config),
                "fingerprint": scrub_secrets(fingerprint),
                "parent_run_id": parent_run_id,
            },
        ).scalar_one()


def set_run_status(engine: Engine, run_id: int, status: str) -> None:
    """Set the status; any status but ``running`` also stamps ``finished_at``."""
    if status not in RUN_STATUSES:
        raise ConfigError(f"unknown run status {status!r}: use one of {', '.join(RUN_STATUSES)}")
    finished_at = None if status == "running" else datetime.now(UTC)
    with write_transaction(engine) as conn:
        done = conn.execute(
            update(runs).where(runs.c.id == run_id).values(status=status, finished_at=finished_at)
        )
        if done.rowcount == 0:
            raise ConfigError(f"no run with id {run_id}")


def update_run_config(engine: Engine, run_id: int, changes: dict) -> dict:
    """Merge ``changes`` into run ``run_id``'s config in one transaction (scrubbed as
    :func:`create_run` scrubs it); the merged config."""
    with write_transaction(engine) as conn:
        row = _run_row(conn, run_id)
        if row is None:
            raise ConfigError(f"no run with id {run_id}")
        config = {**(row.config or {}), **scrub_secrets(changes)}
        conn.execute(update(runs).where(runs.c.id == run_id).values(config=config))
        return config


def add_target(
    engine: Engine, run_id: int, *, name: str, model: str, base_url: str, settings: dict
) -> int:
    """The target's id; a name already added to this run returns the existing id as is."""
    with write_transaction(engine) as conn:
        if _run_row(conn, run_id) is None:
            raise ConfigError(f"no run with id {run_id} to add target {name!r} to")
        existing = conn.execute(
            select(targets.c.id).where(targets.c.run_id == run_id, targets.c.name == name)
        ).scalar()
        if existing is not None:
            return existing
        return conn.execute(
            insert(targets).returning(targets.c.id),
            {
                "run_id": run_id,
                "name": name,
                "model": model,
                "base_url": base_url,
                "settings": scrub_secrets(settings),
            },
        ).scalar_one()


def get_run(engine: Engine, run_id: int) -> RunInfo:
    with engine.connect() as conn:
        row = _run_row(conn, run_id)
    if row is None:
        raise ConfigError(
            f"no run with id {run_id} in this store: check --db and the run id", field="run"
        )
    return _run_info(row)


def resolve_run(engine: Engine, ref: str | int) -> RunInfo:
    """The run a reference names: an id (``12`` or ``"12"``), ``latest``, ``label:NAME``.

    ``latest`` is the newest run that holds at least one session, and ``label:NAME`` the
    newest such run with that label: a run that ended with nothing stored (``finished``
    or ``failed`` with no session: an import that found nothing, a run whose server never
    answered) is skipped, so ``report latest`` and ``gate --run latest`` never judge an
    empty run while a run with sessions exists.  A ``running`` or ``interrupted`` run is
    never skipped, empty or not: its sessions may still come, and ``run --resume latest``
    must resume it rather than an older run, except an import: an import still
    ``running`` or ``interrupted`` was killed or stopped half-way (imports never resume),
    so it is never named by ``latest`` or ``label:NAME``.  When no run qualifies, the
    newest candidate itself is returned.  An id always names exactly that run.
    """
    text = str(ref).strip()
    if isinstance(ref, int) or text.isdigit():
        if len(text) > 10 or int(text) > MAX_ID:  # no such row; and not worth a query
            raise ConfigError(f"no run with id {text[:24]} in this store: check --db and "
                              "the run id", field="run")
        return get_run(engine, int(text))
    query = select(runs).order_by(runs.c.id.desc()).limit(1)
    if text == "latest":
        missing = ("the store holds no runs yet (an import that never finished does not "
                   "count): start one with `agent-eval run`")
    elif text.startswith("label:") and text[len("label:") :]:
        query = query.where(runs.c.label == text[len("label:") :])
        missing = "no run has that label"
    else:
        raise ConfigError(
            f"run reference {text!r} is not a run: use an id, `latest` or `label:NAME`",
            field="run",
        )
    # an import that did not finish (Ctrl-C, killed) is never taken for a complete one
    unfinished_import = and_(runs.c.kind == "import", runs.c.status.in_(("running", "interrupted")))
    query = query.where(not_(unfinished_import))
    worth_naming = or_(
        exists().where(sessions.c.run_id == runs.c.id),
        runs.c.status.in_(("running", "interrupted")),
    )
    with engine.connect() as conn:
        row = conn.execute(query.where(worth_naming)).first() or conn.execute(query).first()
    if row is None:
        raise ConfigError(f"run reference {text!r}: {missing}", field="run")
    return _run_info(row)


def list_runs(engine: Engine, limit: int = 20, label: str | None = None) -> list[RunInfo]:
    """The newest runs first (with ``label`` only, when given)."""
    query = select(runs).order_by(runs.c.id.desc()).limit(limit)
    if label is not None:
        query = query.where(runs.c.label == label)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [_run_info(row) for row in rows]


def previous_run_id(engine: Engine, run: RunInfo) -> int | None:
    """The newest run older than ``run`` with its label (None without a label or one)."""
    if not run.label:
        return None
    with engine.connect() as conn:
        return conn.execute(select(runs.c.id).where(runs.c.label == run.label,
                                                    runs.c.id < run.id)
                            .order_by(runs.c.id.desc()).limit(1)).scalar()


def run_targets(engine: Engine, run_id: int) -> list[TargetInfo]:
    """The run's targets in the order they were added."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(targets).where(targets.c.run_id == run_id).order_by(targets.c.id)
        ).all()
    return [
        TargetInfo(
            id=r.id,
            run_id=r.run_id,
            name=r.name,
            model=r.model,
            base_url=r.base_url,
            settings=r.settings,
        )
        for r in rows
    ]


def run_scenarios(engine: Engine, run_id: int) -> list[str]:
    """The names of the scenarios the run has sessions of, sorted (read from the sessions'
    covering index)."""
    with engine.connect() as conn:
        return list(conn.execute(select(sessions.c.scenario).where(sessions.c.run_id == run_id)
                                 .distinct().order_by(sessions.c.scenario)).scalars())


def _run_row(conn: Connection, run_id: int) -> Row | None:
    return conn.execute(select(runs).where(runs.c.id == run_id)).first()


def _run_info(row: Row) -> RunInfo:
    return RunInfo(
        id=row.id,
        label=row.label,
        kind=row.kind,
        status=row.status,
        suite=row.suite,
        created_at=row.created_at,
        finished_at=row.finished_at,
        config=row.config,
        fingerprint=row.fingerprint,
        parent_run_id=row.parent_run_id,
    )


def session_coverage(engine: Engine, run_id: int) -> dict[str, Coverage]:
    """Per target of the run (declared order), its top-level sessions planned, played,
    judged and lost by cause (``metrics.coverage``): one GROUP BY, the error text read as
    far as the truncation or stack-fault prefix only."""
    from sqlalchemy import case, func

    info = get_run(engine, run_id)
    planned = planned_sessions(info.config)
    cut = case((sessions.c.error.startswith(TRUNCATED, autoescape=True), TRUNCATED),
               (sessions.c.error.startswith(STACK_FAULT, autoescape=True), STACK_FAULT),
               else_=None)
    query = (select(targets.c.name, sessions.c.status, cut, func.count())
             .select_from(sessions.join(targets, sessions.c.target_id == targets.c.id))
             .where(sessions.c.run_id == run_id, sessions.c.parent_id.is_(None))
             .group_by(targets.c.name, sessions.c.status, cut))
    played: dict[str, list[tuple[str, str | None]]] = {
        t.name: [] for t in run_targets(engine, run_id)}
    with engine.connect() as conn:
        for name, status, error, n in conn.execute(query):
            played.setdefault(name, []).extend([(status, error)] * n)
    return {name: coverage_of(name, planned, rows) for name, rows in played.items()}
