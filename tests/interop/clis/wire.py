"""HTTP/1.1 messages out of the raw bytes of a recorded connection (``sandbox.Relay``), with
h11 doing the framing (Content-Length, chunked, close-delimited), so the bodies compared
are exactly the bytes the message carried, after transfer decoding and before any content
decoding."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from typing import Any

import h11

from .sandbox import Connection


@dataclass(frozen=True)
class Message:
    """One request (``method``, ``target``) or response (``status``) and its body."""

    headers: list[tuple[str, str]]
    body: bytes
    method: str = ""
    target: str = ""
    status: int = 0
    complete: bool = True  # False: the connection closed before the message ended

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def decoded_body(self) -> bytes:
        """The body with its Content-Encoding (gzip, deflate) undone."""
        coding = (self.header("content-encoding") or "").lower()
        if coding == "gzip":
            return gzip.decompress(self.body)
        if coding == "deflate":
            return zlib.decompress(self.body)
        if coding in ("", "identity"):
            return self.body
        raise ValueError(f"content-encoding {coding} not handled")


def _headers(event: h11.Request | h11.Response) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]


def _next(conn: h11.Connection, data: bytes, *, at_end: bool,
          partial: bool = False) -> tuple[Any, bytes, bytes | None]:
    """(head event, body, bytes left after the message) of the next message in ``data``.
    With ``partial``, a message whose head came whole but whose body the connection's
    close cut is returned with ``None`` as the bytes left (the last message)."""
    conn.receive_data(data)
    if at_end:
        conn.receive_data(b"")
    head, body = None, bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            if partial and head is not None:
                return head, bytes(body), None
            raise ValueError(f"the recorded stream ends inside a message ({exc})") from None
        if isinstance(event, h11.Request | h11.Response):
            head = event
        elif isinstance(event, h11.InformationalResponse):
            continue
        elif isinstance(event, h11.Data):
            body.extend(event.data)
        elif isinstance(event, h11.EndOfMessage):
            leftover, _ = conn.trailing_data
            return head, bytes(body), bytes(leftover)
        elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
            raise ValueError("the recorded stream ends inside a message")
        else:
            raise ValueError(f"unexpected HTTP event {event!r}")


@dataclass(frozen=True)
class Exchange:
    """One request, its response (None: the connection closed before one), and when the
    request's first byte arrived (``time.monotonic``), to order several connections."""

    request: Message
    response: Message | None
    started: float


def exchanges(connection: Connection) -> list[Exchange]:
    """Every exchange of one connection, in order."""
    out: list[Exchange] = []
    sent, received = bytes(connection.sent), bytes(connection.received)
    total = len(sent)
    while sent:
        offset = total - len(sent)
        started = max((t for at, t in connection.marks if at <= offset), default=0.0)
        head, body, sent = _next(h11.Connection(h11.SERVER), sent, at_end=False)
        request = Message(_headers(head), body, method=head.method.decode(),
                          target=head.target.decode("latin-1"))
        if not received:
            out.append(Exchange(request, None, started))
            break
        client = h11.Connection(h11.CLIENT)
        client.send(h11.Request(method=head.method, target=head.target,
                                headers=[("Host", "recorded"), ("Content-Length", "0")]))
        client.send(h11.EndOfMessage())
        head, body, left = _next(client, received, at_end=True, partial=True)
        out.append(Exchange(request, Message(_headers(head), body, status=head.status_code,
                                             complete=left is not None), started))
        if left is None:  # the connection closed inside this response: nothing follows
            break
        received = left
    return out
