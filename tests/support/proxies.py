"""Real proxies from Debian's packages on 127.0.0.1 for the fetcher's tests: tinyproxy (an HTTP
proxy, CONNECT for HTTPS, Basic credentials) and microsocks (SOCKS5, user and password).
Each runs in the foreground of its own process and logs the requests it forwards, which the
tests read. Without the programs the tests skip, unless FILBERT_PROXY_TESTS=required (CI
installs them) makes that a failure."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pipeline import free_port


@dataclass
class RunningProxy:
    url: str  # scheme://[user:password@]127.0.0.1:port
    port: int
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def need(program: str) -> str:
    """The program's path; skips the test (fails it where required) when it is missing."""
    path = shutil.which(program)
    if path is None:
        message = f"{program} is not installed (apt-get install {program})"
        if os.environ.get("FILBERT_PROXY_TESTS") == "required":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the proxy exited: {log.read_text(errors='replace')[-500:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"the proxy did not listen on {port}")


@contextmanager
def _running(command: list[str], port: int, log: Path, url: str) -> Iterator[RunningProxy]:
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, process, log)
        yield RunningProxy(url, port, log)
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def tinyproxy(folder: Path, user: str = "", password: str = "") -> Iterator[RunningProxy]:
    """An HTTP proxy; with `user`, it asks for Basic credentials (407 without them)."""
    program = need("tinyproxy")
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)  # it may drop root for nobody, who must write its log
    port, log = free_port(), folder / "tinyproxy.log"
    lines = [
        f"Port {port}",
        "Listen 127.0.0.1",
        "Timeout 30",
        f'LogFile "{log}"',
        "LogLevel Connect",
        "MaxClients 64",
        "Allow 127.0.0.1",
    ]
    if user:
        lines.append(f"BasicAuth {user} {password}")
    config = folder / "tinyproxy.conf"
    config.write_text("\n".join(lines) + "\n")
    credentials = f"{user}:{password}@" if user else ""
    url = f"http://{credentials}127.0.0.1:{port}"
    with _running([program, "-d", "-c", str(config)], port, folder / "tinyproxy.out", url) as p:
        yield RunningProxy(p.url, port, log)


@contextmanager
def microsocks(folder: Path, user: str = "", password: str = "") -> Iterator[RunningProxy]:
    """A SOCKS5 proxy (names resolved by the proxy with socks5h://)."""
    program = need("microsocks")
    folder.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), folder / "microsocks.log"
    command = [program, "-i", "127.0.0.1", "-p", str(port)]
    if user:
        command += ["-u", user, "-P", password]
    credentials = f"{user}:{password}@" if user else ""
    with _running(command, port, log, f"socks5h://{credentials}127.0.0.1:{port}") as proxy:
        yield proxy
