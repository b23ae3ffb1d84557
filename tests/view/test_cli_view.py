"""`agent-eval view` binds loopback by default and says so when told otherwise."""

from __future__ import annotations

from click.testing import CliRunner

from agent_eval.cli import main


def run_view(monkeypatch, tmp_path, *args: str):
    served = {}

    def fake_serve(store, *, host, port, allow_hosts):
        served.update(host=host, port=port, url=store.url)
        if allow_hosts:
            served["allow_hosts"] = allow_hosts

    monkeypatch.setattr("agent_eval.view.serve", fake_serve)
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
