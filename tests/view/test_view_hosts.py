"""The viewer answers only requests addressed to it (a page that rebinds its own name to
127.0.0.1 gets nothing), and a number out of the store's range in a URL is a 400 page,
never a 500."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from support.view_fixtures import PIPED

from agent_eval.view.app import run_view_in_thread


def fetch(base: str, path: str, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(base + path, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def base(filled):
    store, f = filled
    with run_view_in_thread(store) as url:
        yield url, f


def test_a_dns_rebinding_page_reads_nothing(base):
    """The attacker's page at http://rebind.attacker.example:PORT/, its name now resolving
    to 127.0.0.1: the browser sends that name as the Host."""
    url, f = base
    port = url.rsplit(":", 1)[1]
    for path in ("/", f"/calls?run_id={f.run_id}", f"/sessions/{f.ids['careful/pipe/0']}.html"):
        status, body = fetch(url, path, host=f"rebind.attacker.example:{port}")
        assert status == 403 and "--allow-host" in body
        assert "db_query.py" not in body and "nightly" not in body


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.",
                                  "[::1]:{port}", None])
def test_the_loopback_names_are_answered(base, host):
    url, f = base
    port = url.rsplit(":", 1)[1]
    status, body = fetch(url, f"/calls?run_id={f.run_id}",
                         host=host.format(port=port) if host else None)
    assert status == 200 and "db_query.py" in body


def test_a_missing_host_header_is_refused(base):
    """HTTP/1.1 requires one: aiohttp's parser answers 400 before the viewer sees it."""
    import http.client

    url, _ = base
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("GET", "/", skip_host=True)
    conn.endheaders()
    assert conn.getresponse().status in (400, 403)
    conn.close()


def test_allowed_names_and_addresses_on_all_interfaces(filled):
    store, f = filled
    with run_view_in_thread(store, host="0.0.0.0", allow_hosts=("evals.lan",)) as url:
        port = url.rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"
        assert fetch(base, "/", host=f"evals.lan:{port}")[0] == 200
        assert fetch(base, "/", host=f"10.1.2.3:{port}")[0] == 200  # an address cannot be rebound
        assert fetch(base, "/", host=f"other.lan:{port}")[0] == 403


HUGE = "9" * 30


@pytest.mark.parametrize("path", [
    f"/?offset={HUGE}", f"/runs/{HUGE}", f"/sessions/{HUGE}.html", f"/compare?a={HUGE}&b=1",
    f"/calls?run_id={HUGE}", f"/sessions?run_id={HUGE}", f"/calls?session_id={HUGE}",
    f"/calls?run_id=1&offset={HUGE}", f"/calls?run_id=-{HUGE}", "/?offset=-1", "/?offset=1e5",
    f"/runs/{'9' * 5000}", "/runs/2147483648", "/runs/%D9%A3",
])
def test_a_number_out_of_range_is_a_400_page(base, path):
    url, _ = base
    status, body = fetch(url, path)
    assert status == 400, body
    assert "must be a whole number from 0 to 2147483647" in body


def test_the_largest_number_is_a_plain_not_found(base):
    url, _ = base
    status, body = fetch(url, "/runs/2147483647")
    assert status == 404 and "no run with id 2147483647" in body
    assert PIPED not in body
