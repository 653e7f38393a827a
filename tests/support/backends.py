"""A loopback search backend for index writer tests: Elasticsearch's _bulk, Solr's JSON
updates and an NDJSON endpoint, each reading what it is sent strictly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Invalid(Exception):
    """What the loopback server was sent is not the format it expects."""


@dataclass
class Received:
    path: str
    content_type: str
    authorization: str | None
    body: bytes


class Backend(ThreadingHTTPServer):
    """Elasticsearch (POST /_bulk, /INDEX/_refresh), Solr (POST /solr/filbert/update) and an
    NDJSON endpoint (POST /ingest) on 127.0.0.1, reading what they are sent strictly.
    `answers` plans the next answers: a status (answered with that server's error body),
    or "item-400"/"item-429" (a _bulk answer of 200 refusing its first item so); then 200."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.docs: dict[str, dict[str, dict[str, Any]]] = {}  # index or core: id: document
        self.received: list[Received] = []
        self.answers: list[int | str] = []
        self.problems: list[str] = []
        self.commits = 0
        self.refreshes: list[str] = []

    def on(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path.partition("?")[0] == path]

    def answer(self, received: Received) -> tuple[int, dict[str, Any] | str]:
        planned = self.answers.pop(0) if self.answers else 200
        if isinstance(planned, int) and planned != 200:
            return planned, _error_body(received.path, planned)
        path = received.path.partition("?")[0]
        if path == "/_bulk":
            return 200, self.bulk(
                received, fail_first={"item-400": 400, "item-429": 429}.get(planned)
            )
        if path.endswith("/_refresh"):
            self.refreshes.append(received.path)
            return 200, {"_shards": {"total": 2, "successful": 1, "failed": 0}}
        if path == "/solr/filbert/update":
            return 200, self.solr(received)
        if path == "/ingest":
            return 200, self.ndjson(received)
        return 404, f"no {path} here"

    def bulk(self, received: Received, fail_first: int | None) -> dict[str, Any]:
        lines = _ndjson_lines(received)
        index: dict[str, dict[str, Any]]
        items = []
        while lines:
            action, meta = single_key(lines.pop(0))
            if action not in ("index", "delete") or set(meta) != {"_index", "_id"}:
                raise Invalid(f"bad action line {action!r} {meta!r}")
            if len(meta["_id"].encode()) > 512:
                raise Invalid("_id longer than 512 bytes")
            index = self.docs.setdefault(meta["_index"], {})
            result = {"_index": meta["_index"], "_id": meta["_id"], "status": 200}
            if action == "index":
                if not lines or not isinstance(source := lines.pop(0), dict):
                    raise Invalid("an index action without its source line")
                if set(source) == {"delete"} or set(source) == {"index"}:
                    raise Invalid("an action where the source line should be")
                if fail_first and not items:
                    result |= {"status": fail_first, "error": _item_error(fail_first)}
                else:
                    result["status"] = 200 if meta["_id"] in index else 201
                    index[meta["_id"]] = source
            elif index.pop(meta["_id"], None) is None:
                result |= {"status": 404, "result": "not_found"}
            items.append({action: result})
        errors = any(next(iter(i.values()))["status"] in (400, 429) for i in items)
        return {"took": 3, "errors": errors, "items": items}

    def solr(self, received: Received) -> dict[str, Any]:
        if received.content_type != "application/json":
            raise Invalid(f"Content-Type {received.content_type}")
        command = json.loads(received.body)
        core = self.docs.setdefault("filbert", {})
        if isinstance(command, list) and all(isinstance(d.get("id"), str) for d in command):
            core.update({d["id"]: d for d in command})
        elif isinstance(command, dict) and list(command) == ["delete"]:
            if not all(isinstance(i, str) for i in command["delete"]):
                raise Invalid("delete takes a list of ids")
            for id_ in command["delete"]:
                core.pop(id_, None)
        elif command == {"commit": {}}:
            self.commits += 1
        else:
            raise Invalid(f"no Solr update command: {received.body[:80]!r}")
        return {"responseHeader": {"status": 0, "QTime": 2}}

    def ndjson(self, received: Received) -> dict[str, Any]:
        stream = self.docs.setdefault("ingest", {})
        for line in _ndjson_lines(received):
            if line.get("deleted") is True and set(line) == {"id", "deleted"}:
                stream.pop(line["id"], None)
            else:
                stream[line["id"]] = line
        return {"ok": True}


def _ndjson_lines(received: Received) -> list[Any]:
    if received.content_type != "application/x-ndjson":
        raise Invalid(f"Content-Type {received.content_type}")
    if not received.body.endswith(b"\n"):
        raise Invalid("the body does not end with a newline")
    lines = received.body[:-1].split(b"\n")
    if any(not line.strip() for line in lines):
        raise Invalid("an empty line")
    return [json.loads(line) for line in lines]


def single_key(line: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(line, dict) or len(line) != 1:
        raise Invalid(f"an action line must have one key: {line!r}")
    ((action, meta),) = line.items()
    return action, meta


def _mapping_error() -> dict[str, str]:
    return {"type": "mapper_parsing_exception", "reason": "failed to parse field [price]"}


def _item_error(status: int) -> dict[str, str]:
    if status == 429:
        return {"type": "es_rejected_execution_exception", "reason": "queue full"}
    return _mapping_error()


def _error_body(path: str, status: int) -> dict[str, Any] | str:
    if path.startswith("/solr/"):
        message = "ERROR: [doc=http://a.example/0] unknown field 'price'"
        return {"responseHeader": {"status": status}, "error": {"msg": message, "code": status}}
    if path == "/ingest":
        return "busy,\n  come back later"
    error = _mapping_error() if status == 400 else {"type": "overloaded", "reason": "try later"}
    return {"error": {"root_cause": [error], **error}, "status": status}


class _Handler(BaseHTTPRequestHandler):
    server: Backend

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received = Received(
            self.path, self.headers["Content-Type"], self.headers["Authorization"], body
        )
        self.server.received.append(received)
        try:
            status, answer = self.server.answer(received)
        except (Invalid, ValueError, KeyError, AttributeError) as exc:
            self.server.problems.append(f"{self.path}: {exc}")
            status, answer = 400, {"error": {"type": "invalid", "reason": str(exc)}}
        data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        self.send_response(status)
        if status in (301, 302):
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


PROXY_VARIABLES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy")


@contextmanager
def running_backend() -> Iterator[Backend]:
    """A Backend serving in a thread; no problems found in what it was sent, at the end."""
    server = Backend()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not server.problems, server.problems
