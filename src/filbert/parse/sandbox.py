"""Documents parsed in a child process, bounded in memory and time.

A PDF is a program: a 2 MB file whose one Flate content stream inflates to 600 MB of text
operators took PDFium 45 s and 8.7 GB, and under a memory limit PDFium aborts the whole
process when an allocation fails, so a crawl stopped at the same page on every re-run. The
64 MB of XML an office file may unzip to (MAX_UNZIPPED) still costs lxml 1-1.5 GB and
3-12 s. Neither library can be told to stop, so documents (every kind parse_document
reads: PDF, DOCX, ODT and feeds) are parsed in a child process:

- one long-lived child per process, thread and pair of limits (`sandbox_for`), started on
  the first document and reused: a document then costs a pickle each way (bench/RESULTS.md
  has the figures). The child is a fresh interpreter (`python -c`, never a fork of a process
  running an event loop or holding locks) and inherits no descriptor but its two pipes: not
  the crawl directory's .lock. A process forked later (a worker pool) forgets its parent's
  children and starts its own;
- the child limits its address space to `parser.document.memory.mb` (RLIMIT_AS), and its
  CPU time to a document's timeout past what it has used (RLIMIT_CPU), a backstop should
  its parent stop watching; it dies with the thread that started it (PR_SET_PDEATHSIG, and
  a getppid check for a parent gone before that) and ignores Ctrl-C, which its parent hears;
- the parent waits up to `parser.document.timeout` seconds for each answer. A child that
  runs out of memory (a MemoryError, or PDFium's abort), overruns or dies is killed and
  replaced at the next document, and the document raises DocumentError with the reason: a
  parse failure of that page alone.
"""

from __future__ import annotations

import atexit
import ctypes
import math
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from filbert.parse.documents import DocumentError, parse_document
from filbert.parse.result import Found, ParseResult

_START_TIMEOUT = 60.0  # seconds for a child to import its libraries, on a loaded machine
_READY = b"ready"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_CHILD = "from filbert.parse.sandbox import serve; serve()"


class DocumentSandbox:
    """parse_document in a child process that may use `memory_mb` MB of address space and
    `timeout` seconds per document. One thread uses it at a time (sandbox_for gives each
    thread its own)."""

    def __init__(self, memory_mb: int, timeout: float):
        self.memory_mb = memory_mb
        self.timeout = timeout
        self.starts = 0  # children started, for tests and the bench
        self._child: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        _every.add(self)

    @property
    def pid(self) -> int | None:
        """The child's process id (None before the first document)."""
        return self._child.pid if self._child else None

    def parse(self, kind: str, url: str, content: bytes, found: Found) -> ParseResult:
        """Parse a document of `kind` in the child (see parse_document); DocumentError
        with the reason if it cannot be read, needs too much memory or time, or kills the
        child."""
        request = pickle.dumps((kind, url, content, found), pickle.HIGHEST_PROTOCOL)
        requests, replies = self._running()
        try:
            requests.send_bytes(request)
        except OSError:  # the child died idle since _running looked
            self.close()
            requests, replies = self._running()
            requests.send_bytes(request)
        if not replies.poll(self.timeout):
            self.close()
            raise DocumentError(
                f"the document took longer than {self.timeout:g} s to parse "
                "(parser.document.timeout)"
            )
        try:
            status, value = pickle.loads(replies.recv_bytes())
        except EOFError:
            raise DocumentError(self._death()) from None
        if status == "memory":
            self.close()  # what a library left behind after failing to allocate is suspect
            raise DocumentError(self._over_memory())
        if status == "failed":
            raise DocumentError(value)
        result: ParseResult = value
        return result

    def close(self) -> None:
        """Stop the child; the next document starts another."""
        child, self._child = self._child, None
        if child is None:
            return
        self._close_pipes()
        child.kill()
        child.wait()

    def _running(self) -> tuple[Connection, Connection]:
        """The child's pipes, (re)starting it if it is not running: it may have died idle,
        with the thread that started it."""
        if self._child is not None and self._child.poll() is not None:
            self.close()
        if self._child is None:
            self._start()
        assert self._requests is not None and self._replies is not None
        return self._requests, self._replies

    def _start(self) -> None:
        requests_in, requests_out = os.pipe()
        replies_in, replies_out = os.pipe()
        limits = [str(self.memory_mb), repr(self.timeout), str(os.getpid())]
        command = [sys.executable, "-c", _CHILD, *limits]
        try:  # close_fds: the child inherits only its stdin and stdout
            self._child = subprocess.Popen(command, stdin=requests_in, stdout=replies_out)
        finally:
            os.close(requests_in)
            os.close(replies_out)
        self.starts += 1
        self._requests = Connection(requests_out, readable=False)
        self._replies = Connection(replies_in, writable=False)
        try:
            ready = self._replies.poll(_START_TIMEOUT) and self._replies.recv_bytes() == _READY
        except EOFError:
            ready = False
        if not ready:
            self.close()
            raise DocumentError("the document parser's process did not start (see its errors)")

    def _death(self) -> str:
        """Why the child died, reaping it."""
        assert self._child is not None
        code = self._child.wait()
        self.close()
        if code == -signal.SIGABRT:  # PDFium aborts when an allocation fails
            return self._over_memory()
        if code == -signal.SIGXCPU:
            return f"the document took longer than {self.timeout:g} s of CPU to parse"
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return f"the document parser died ({how})"

    def _over_memory(self) -> str:
        return (
            f"the document exceeds the parser memory limit of {self.memory_mb} MB "
            "(parser.document.memory.mb)"
        )

    def _close_pipes(self) -> None:
        for pipe in (self._requests, self._replies):
            if pipe is not None:
                pipe.close()
        self._requests = self._replies = None

    def _forget(self) -> None:
        """In a forked process: the child is the parent's, only its pipes are ours."""
        self._close_pipes()
        self._child = None


_every: weakref.WeakSet[DocumentSandbox] = weakref.WeakSet()
_local = threading.local()


def sandbox_for(settings: Mapping[str, Any]) -> DocumentSandbox:
    """This thread's sandbox with the limits of `settings`, reused across documents."""
    limits = (settings["parser.document.memory.mb"], settings["parser.document.timeout"])
    sandboxes: dict[tuple[int, float], DocumentSandbox] = _local.__dict__.setdefault("all", {})
    if limits not in sandboxes:
        sandboxes[limits] = DocumentSandbox(*limits)
    return sandboxes[limits]


def close_sandboxes() -> None:
    """Stop every child of this process (at exit)."""
    for sandbox in list(_every):
        sandbox.close()


def _forget_sandboxes() -> None:
    for sandbox in list(_every):
        sandbox._forget()


atexit.register(close_sandboxes)
os.register_at_fork(after_in_child=_forget_sandboxes)


# --- The child -----------------------------------------------------------------------


def serve() -> None:
    """The child's loop: argv is the memory limit in MB, the timeout and the parent's
    pid; requests come on stdin, answers go out on what was stdout (stdout itself then
    writes to stderr, so that nothing a library prints can garble an answer)."""
    memory_mb, timeout, parent = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    requests = Connection(0, writable=False)
    import pypdfium2  # noqa: F401  (imported before the limit, as parse_document imports it late)

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file per bomb
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    replies.send_bytes(_READY)
    while True:
        try:
            request = requests.recv_bytes()
        except EOFError:
            return
        _limit_cpu(timeout)
        answer = _answer(request)
        replies.send_bytes(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
        if answer[0] == "memory":
            return


def _answer(request: bytes) -> tuple[str, object]:
    """("ok", ParseResult), ("failed", reason) or ("memory", None)."""
    try:
        kind, url, content, found = pickle.loads(request)
        return "ok", parse_document(kind, url, content, found)
    except MemoryError:
        return "memory", None
    except DocumentError as exc:
        return "failed", str(exc)
    except Exception as exc:  # as parse_content says of any other failure
        return "failed", f"{type(exc).__name__}: {exc}"


def _die_with(parent: int) -> None:
    """Be killed when the thread that started this process ends; exit if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _limit_cpu(timeout: float) -> None:
    """SIGXCPU (death) past a second more than `timeout` of CPU on this document: the
    parent kills the child at `timeout` of wall time first, unless it stopped watching."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + timeout) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
