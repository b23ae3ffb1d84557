"""`agent-eval view` binds loopback by default and says so when told otherwise; a port
in use is one `Error:` line, before any ready line."""

from __future__ import annotations

import socket

from click.testing import CliRunner

from agent_eval.cli import EXIT_USAGE, main
from agent_eval.store import open_store


class FakeSocket:
    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)

    def getsockname(self):
        return self.address


def run_view(monkeypatch, tmp_path, *args: str):
    served = {}

    def fake_serve(store, *, host, sock, allow_hosts):
        served.update(host=host, port=sock.getsockname()[1], url=store.url)
        if allow_hosts:
            served["allow_hosts"] = allow_hosts

    monkeypatch.setattr("agent_eval.view.bind", FakeSocket)
    monkeypatch.setattr("agent_eval.view.serve", fake_serve)
    open_store(str(tmp_path / "v.db")).close()
    result = CliRunner().invoke(main, ["view", "--db", str(tmp_path / "v.db"), *args])
    assert result.exit_code == 0, result.output
    return served, result


def test_view_binds_loopback_by_default(monkeypatch, tmp_path):
    served, result = run_view(monkeypatch, tmp_path)
    assert served == {"host": "127.0.0.1", "port": 8700,
                      "url": f"sqlite:///{tmp_path / 'v.db'}"}
    assert result.output.startswith("agent-eval view: http://127.0.0.1:8700/ over sqlite:")
    assert "warning" not in result.output


def test_view_on_another_address_warns(monkeypatch, tmp_path):
    served, result = run_view(monkeypatch, tmp_path, "--host", "0.0.0.0", "--port", "9000")
    assert served["host"] == "0.0.0.0" and served["port"] == 9000
    assert ("warning: listening on 0.0.0.0, not loopback: anyone who can reach this machine "
            "on port 9000 can read every stored transcript") in result.output


def test_view_passes_the_host_names_to_allow(monkeypatch, tmp_path):
    served, _ = run_view(monkeypatch, tmp_path, "--allow-host", "evals.lan",
                         "--allow-host", "box")
    assert served["allow_hosts"] == ("evals.lan", "box")


def test_view_on_a_port_in_use_is_one_error_line_naming_the_port(tmp_path):
    open_store(str(tmp_path / "v.db")).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["view", "--db", str(tmp_path / "v.db"),
                                           "--port", str(port)])
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.stdout == ""  # no ready line for a viewer that never listened
    assert result.stderr.splitlines() == [
        f"Error: --port: port {port} on 127.0.0.1 is in use (another viewer?): give "
        "--port N, or --port 0 for a free one"]
