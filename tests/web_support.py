"""The web view in tests: started with `specrun web` as a real process, and a real headless
Chromium (Debian's, installed by scripts/_system_deps.sh) driven by Playwright."""

from __future__ import annotations

import contextlib
import functools
import os
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import Specrun

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class WebView:
    url: str  # as printed, with the token
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    said: Callable[[], str]  # what it wrote to stderr so far

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @functools.cached_property
    def trade(self) -> Any:
        """The answer to the one load the printed URL is good for (an ``httpx.Response``):
        a test that reads it and one that signs in share it."""
        import httpx

        return httpx.get(self.url, follow_redirects=False, timeout=30)

    @functools.cached_property
    def _signed_in(self) -> tuple[str, str]:
        """(the Cookie header, the key) the page gets for the token, as a browser gets them."""
        import httpx

        response = self.trade
        assert response.status_code == 303, response.text
        name, value = response.headers["set-cookie"].split(";")[0].split("=", 1)
        code = response.headers["location"].removeprefix("/#handoff=")
        traded = httpx.post(
            self.base + "/handoff", json={"code": code}, timeout=30,
            headers={"cookie": f"{name}={value}", "origin": self.base},
        )
        assert traded.status_code == 200, traded.text
        return f"{name}={value}", traded.json()["key"]

    @property
    def cookie(self) -> str:
        return self._signed_in[0]

    @property
    def key(self) -> str:
        """What the page sends to /api/ (the ``X-Specrun-Key`` header or ``?key=``)."""
        return self._signed_in[1]


@contextmanager
def web_view(
    specrun: Specrun, *args: str, timeout: float = 60, ends_itself: bool = False,
    verbose: bool = False,
) -> Iterator[WebView]:
    """`specrun web` for the project's running service, stopped (SIGINT) afterwards; one
    that ended by itself meanwhile fails the test with what it wrote (unless
    ``ends_itself``: the test stops the service, and the view with it). ``verbose``:
    `specrun --verbose web`."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "--project", str(specrun.project),
             *(["--verbose"] if verbose else []), "web", *args],
            env=specrun.env.vars,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            bufsize=0,  # unbuffered: a line already read into a buffer would starve select()
        )

        def said() -> str:
            err.seek(0)
            return err.read()

        try:
            url = _printed_url(proc, timeout, said)
            parts = urlsplit(url)
            token = parse_qs(parts.query)["token"][0]
            try:
                yield WebView(url, int(parts.port or 0), token, proc, said)
            except BaseException as exc:
                if proc.poll() is not None:
                    exc.add_note(f"`specrun web` had ended ({proc.returncode}): {said()}")
                raise
            if proc.poll() is not None and not ends_itself:
                raise AssertionError(f"`specrun web` ended early ({proc.returncode}): {said()}")
        finally:
            if proc.poll() is None:
                proc.send_signal(2)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _printed_url(proc: subprocess.Popen[bytes], timeout: float, said: Any) -> str:
    assert proc.stdout is not None
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline().decode() if ready else ""
        if not line:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            raise AssertionError(f"`specrun web` printed no URL in {timeout} s: {said()}")
        if line.startswith("http://"):
            return line.strip()


def need_chromium() -> None:
    """Skip, saying why, where the browser cannot be had (scripts/_system_deps.sh installs
    it with apt when run as root; CI does)."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: scripts/_system_deps.sh installs Debian's chromium "
            "(as root, with apt-get); without it the browser tests cannot run"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed (the test extra has it: pip install -e '.[test]')")


class _ModuleChromium:
    """One Chromium per extra-switch set, launched at a test module's first ``browser()``
    and closed when the module ends (``module_chromium``)."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.launched: dict[tuple[str, ...], Any] = {}

    def launched_with(self, extra_args: tuple[str, ...]) -> Any:
        if extra_args not in self.launched:
            if self.playwright is None:
                from playwright.sync_api import sync_playwright

                # Playwright's driver, and every Chromium it launches, inherit the
                # environment of this moment. A module's service (``running_service``)
                # points SPECRUN_RUNTIME_DIR at its runtime directory meanwhile, and its
                # teardown waits 10 s for every process carrying it, then kills them: the
                # shared Chromium then died unclosed and left its profile directory in /tmp.
                with _environ_without("SPECRUN_RUNTIME_DIR"):
                    self.playwright = sync_playwright().start()
            self.launched[extra_args] = self.playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True,
                args=[*CHROMIUM_ARGS, *extra_args],
            )
        return self.launched[extra_args]

    def close(self) -> None:
        for launched in self.launched.values():
            with contextlib.suppress(Exception):
                launched.close()
        if self.playwright is not None:
            self.playwright.stop()


_MODULE_CHROMIUM: list[_ModuleChromium] = []


@contextmanager
def _environ_without(name: str) -> Iterator[None]:
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


@contextmanager
def module_chromium() -> Iterator[None]:
    """Within it, ``browser()`` opens a fresh context (its own cookies, storage and cache,
    as a fresh profile has) in a Chromium the module shares, instead of launching one per
    test: a launch costs about a second of CPU and a dozen processes. For a module-scoped
    fixture of the browser test modules only: while Playwright's sync API runs, its event
    loop counts as running in this thread, so ``asyncio.run`` there would be refused."""
    shared = _ModuleChromium()
    _MODULE_CHROMIUM.append(shared)
    try:
        yield
    finally:
        _MODULE_CHROMIUM.remove(shared)
        shared.close()


@contextmanager
def browser(*extra_args: str) -> Iterator[Any]:
    """A fresh headless Chromium profile (a temporary --user-data-dir), closed afterwards;
    under ``module_chromium``, a fresh context of the module's Chromium instead.
    ``extra_args``: more Chromium switches (e.g. a host resolver rule)."""
    need_chromium()
    if _MODULE_CHROMIUM:
        launched = _MODULE_CHROMIUM[-1].launched_with(tuple(extra_args))
        context = launched.new_context(viewport={"width": 1400, "height": 1000})
        try:
            yield context
        finally:
            with contextlib.suppress(Exception):
                context.close()
        return
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="sr-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=[*CHROMIUM_ARGS, *extra_args],
                viewport={"width": 1400, "height": 1000},
            )
            try:
                yield context
            finally:
                with contextlib.suppress(Exception):
                    context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_page(context: Any, web: WebView) -> Any:
    """A new page of ``context`` signed in with the view's printed URL, once its event
    stream is connected (what a test can then watch follows the service)."""
    page = context.new_page()
    if "_signed_in" in web.__dict__:  # the printed URL was spent: sign in as a reload does
        name, value = web.cookie.split("=", 1)
        context.add_cookies([{"name": name, "value": value, "url": web.base}])
        context.add_init_script(f"localStorage.setItem('specrun_key', {web.key!r})")
        page.goto(web.base + "/")
        page.wait_for_selector("#connection.ok")
        return page
    page.goto(web.url)
    page.wait_for_selector("#connection.ok")
    signed_in_by(page, web)
    return page


@contextmanager
def page_of_service(specrun: Specrun, *start_args: str) -> Iterator[Any]:
    """``specrun start *start_args``, its web view and one page connected to it in
    Chromium; the service is stopped at the end."""
    need_chromium()
    specrun.run("start", *start_args, check=True)
    try:
        with web_view(specrun) as view, browser() as context:
            yield open_page(context, view)
    finally:
        specrun.run("stop")


def signed_in_by(page: Any, web: WebView) -> None:
    """The printed token works once: once a browser page spent it, the test's own requests
    use the cookie and the key that page got."""
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    name = f"specrun_web_{web.port}"
    key = page.evaluate("localStorage.getItem('specrun_key')")
    web.__dict__["_signed_in"] = (f"{name}={cookies[name]}", key)


def save_screenshot(page: Any, name: str, tmp_path: Path) -> Path:
    """Always into ``tmp_path``; also to docs/``name`` when SPECRUN_WEB_SCREENSHOT=1 (how
    docs/web.png is made: from a real run of the browser test)."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("SPECRUN_WEB_SCREENSHOT") == "1":
        docs = Path(__file__).resolve().parent.parent / "docs" / name
        shutil.copyfile(shot, docs)
    return shot
