"""`specrun web` and `specrun start --web` as a person runs them: without a service, a busy
port, and a background view that serves at the printed URL and ends with the service."""

from __future__ import annotations

import socket

import httpx
import psutil

from tests.support import Specrun, wait_until


def test_web_without_a_service_says_so_and_exits_2(specrun: Specrun) -> None:
    proc = specrun.run("web")
    assert proc.returncode == 2
    assert "No specrun service is running" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_port_in_use_is_one_sentence(specrun: Specrun) -> None:
    specrun.run("start", check=True)
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = specrun.run("web", "--port", str(port))
        assert proc.returncode == 1
        assert f"Cannot listen on 127.0.0.1:{port}" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert specrun.run("web", "--port", "70000").returncode != 0
        # `start --web` on it: the service runs, and the view's own reason is said.
        started = specrun.run("start", "--web", "--web-port", str(port))
        assert started.returncode == 1
        assert f"Cannot listen on 127.0.0.1:{port} (Address already in use)" in started.stderr
        assert "The service is running" in started.stderr and "Traceback" not in started.stderr
        assert specrun.json("status")["pid"]
    finally:
        taken.close()
        specrun.run("stop")


def test_start_with_web_prints_a_url_that_serves_and_the_view_ends_with_the_service(
    specrun: Specrun,
) -> None:
    started = specrun.json("start", "--web")
    url = started["web_url"]
    assert url.startswith("http://127.0.0.1:") and "?token=" in url
    first = httpx.get(url, follow_redirects=False, timeout=30)
    assert first.status_code == 303
    base = url.split("/?")[0]
    cookie = first.headers["set-cookie"].split(";")[0]
    page = httpx.get(base + "/", headers={"cookie": cookie}, timeout=30)
    assert page.status_code == 200 and '<script src="/app.js"' in page.text
    assert httpx.get(url, timeout=30).status_code == 403  # the printed URL works once
    port = int(url.split(":")[2].split("/")[0])
    (view,) = [
        psutil.Process(c.pid) for c in psutil.net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid
    ]
    assert "--background" in view.cmdline()  # a process of its own, not the CLI
    specrun.run("stop", check=True)
    assert wait_until(lambda: not view.is_running() or view.status() == "zombie", timeout=15)
    assert wait_until(lambda: _refused(port), timeout=5)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False
