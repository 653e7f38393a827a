"""Index writers (the `indexwriter` extension point, Nutch's IndexWriter): where each index
round's documents go besides filbert's own search index. indexer-jsonl writes JSON Lines,
indexer-elastic Elasticsearch's or OpenSearch's `_bulk` format, indexer-solr Solr's JSON
update commands.

A writer is told of a round's new and changed pages (`add`: upserts, a document sent
again replaces the one before), of the pages gone from the index (`delete`, by id: the
URL), then `commit`; `close` releases it whatever happened, and drops what commit has not
sent. It keeps the operations in their order and sends a batch when it holds
`indexwriter.batch.size` of them, or before the next would take the batch past
`indexwriter.batch.bytes` (an operation larger than that goes alone); commit sends the rest.
A document is `Document.exported` (fields.py): a flat dict, its id the URL.

A writer's target is a file or an http(s) URL. A file is appended to, a batch at a time
in one write of whole lines (cut back if the write fails), and synced at commit: a reader
never sees half a line. Over HTTP a batch is one POST (for Solr, one per run of adds or of
deletes), retried with exponential backoff (`indexwriter.retries` more times, the first
after `indexwriter.retry.delay` seconds) on connection errors, timeouts, 429 and 5xx:
every operation is an upsert or a delete by id, so one sent twice does no harm. Any
other answer, a batch the server took only in part, or the last retry failing stops the
round with IndexWriterError: one line naming the writer, the URL (without its password),
the status and the server's reason. Basic auth comes from the URL's userinfo
(http://user:pass@host:9200).

HTTP is the standard library's urllib: one POST a batch needs no client library, and
redirects are refused rather than followed (urllib would follow a POST's with a GET).
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import itertools
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol
from urllib.parse import quote, unquote, urlsplit

import orjson

from filbert.errors import UserError

NDJSON = "application/x-ndjson"
JSON = "application/json"
REASON_CHARS = 200  # of the server's reason, in an error's message
ELASTIC_ID_BYTES = 512  # Elasticsearch's limit on a document's _id
_SEPARATORS = [(c.encode(), f"\\u{ord(c):04x}".encode()) for c in "\x85\u2028\u2029"]
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Elasticsearch's rules for index names (lower case, none of these characters, no leading
# -_+.), and at most 255 bytes
_INDEX_NAME = re.compile(r'[^-_+.\\/*?"<>| ,#:A-Z][^\\/*?"<>| ,#:A-Z]*')


class IndexWriterError(UserError):
    """A writer that cannot start, or a batch its target refused or never took."""


class IndexWriter(Protocol):
    """Where each round's indexed documents go besides filbert's own search index."""

    def add(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """New and changed pages (upserts), called with batches."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Pages no longer in the index (id = the URL)."""
        ...

    def commit(self) -> None:
        """The round is complete: flush everything."""
        ...

    def close(self) -> None:
        """Release files and connections (also called after an error)."""
        ...


@dataclass(frozen=True)
class WriterOptions:
    """How every writer batches and retries (defaults.toml's indexwriter.* documents each)."""

    batch_size: int  # operations a batch
    batch_bytes: int  # a batch's body, at most
    retries: int  # more attempts after a retryable failure
    retry_delay: float  # seconds before the first retry, doubled for each next one
    timeout: float  # seconds to connect, and for each read of the answer

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> WriterOptions:
        return cls(
            settings["indexwriter.batch.size"],
            settings["indexwriter.batch.bytes"],
            settings["indexwriter.retries"],
            settings["indexwriter.retry.delay"],
            settings["indexwriter.timeout"],
        )


@dataclass(frozen=True)
class Endpoint:
    """An http(s) target: its URL taken apart, the userinfo made an Authorization header."""

    scheme: str
    host: str  # with its port, if any
    path: str
    query: str  # sent with every request, never shown (it may hold a token)
    user: str | None  # shown in messages; the password never is
    authorization: str | None

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if not parts.hostname or parts.fragment or not _has_valid_port(url):
            raise IndexWriterError(f"{_without_password(url)!r} is not an http(s) URL")
        host = parts.netloc.rpartition("@")[2]
        authorization = _basic(parts.username, parts.password)
        return cls(parts.scheme, host, parts.path, parts.query, parts.username, authorization)

    def url(self, suffix: str = "", query: str = "") -> str:
        """The URL to POST to: the target's, or `suffix` joined to its path."""
        queries = "&".join(q for q in (self.query, query) if q)
        return f"{self.scheme}://{self.host}{self._path(suffix)}" + (
            f"?{queries}" if queries else ""
        )

    def shown(self, suffix: str = "") -> str:
        """The URL as messages show it: no password, no query."""
        user = f"{self.user}@" if self.user else ""
        return f"{self.scheme}://{user}{self.host}{self._path(suffix)}"

    def _path(self, suffix: str) -> str:
        return self.path.rstrip("/") + suffix if suffix else self.path or "/"


def _has_valid_port(url: str) -> bool:
    try:
        return urlsplit(url).port != 0
    except ValueError:
        return False


def parse_target(text: str) -> Path | Endpoint:
    """A target setting's value: an http(s) URL, or else a file path."""
    text = text.strip()
    if text.lower().startswith(("http://", "https://")):
        return Endpoint.parse(text)
    if _SCHEME.match(text) or not text:
        raise IndexWriterError(f"{_without_password(text)!r} is neither an http(s) URL nor a file")
    return Path(text).expanduser()


def index_name(name: str) -> str:
    """An Elasticsearch index name (indexwriter.elastic.index), as its rules allow."""
    if not _INDEX_NAME.fullmatch(name) or len(name.encode()) > 255:
        raise IndexWriterError(
            f"{name!r} is no Elasticsearch index name: lower case, no spaces or any of "
            '\\/*?"<>|,#:, not starting with -_+.'
        )
    return name


def _basic(user: str | None, password: str | None) -> str | None:
    if user is None:
        return None
    pair = f"{unquote(user)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def _without_password(url: str) -> str:
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1@", url)


def _configured(settings: Mapping[str, Any], key: str, writer: str) -> Path | Endpoint:
    """The writer's target setting, parsed; IndexWriterError when it is empty or bad."""
    target = settings[key].strip()
    if not target:
        raise IndexWriterError(
            f"{writer} is enabled (plugin.includes) but {key} is empty: set it to a URL or a file"
        )
    try:
        return parse_target(target)
    except IndexWriterError as exc:
        raise IndexWriterError(f"{writer}: {key}: {exc}") from None


class _Retry(Exception):
    """A failure that another attempt may get past: what it was."""


class _Refused(Exception):
    """An answer that another attempt would not change: its status and reason."""


_Check = Callable[[bytes], None]  # raises _Refused or _Retry on an answer's body


class _Request(NamedTuple):
    path: str  # joined to the target's path; empty: the target itself
    body: bytes
    type: str  # its Content-Type
    query: str = ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib raises the 3xx as an HTTPError


class _Http:
    """POSTs to an endpoint, with retries."""

    def __init__(self, writer: str, endpoint: Endpoint, options: WriterOptions):
        self.writer, self.endpoint, self.options = writer, endpoint, options
        self.opener = urllib.request.build_opener(_NoRedirect)

    def post(self, request: _Request, what: str, check: _Check) -> None:
        """POST the request; IndexWriterError naming `what` (a batch, the commit) if it is
        refused or every attempt fails."""
        where = self.endpoint.shown(request.path)
        attempts = self.options.retries + 1
        for attempt in range(attempts):
            try:
                return check(self._send(request))
            except _Refused as exc:
                raise IndexWriterError(f"{self.writer}: {where} refused {what}: {exc}") from None
            except _Retry as exc:
                if attempt + 1 == attempts:
                    message = f"{self.writer}: {where} did not take {what} in {attempts} attempts"
                    raise IndexWriterError(f"{message}: {exc}") from None
                time.sleep(self.options.retry_delay * 2**attempt)

    def _send(self, request: _Request) -> bytes:
        headers = {"Content-Type": request.type, "Accept": JSON, "User-Agent": "filbert"}
        if self.endpoint.authorization:
            headers["Authorization"] = self.endpoint.authorization
        url = self.endpoint.url(request.path, request.query)
        sent = urllib.request.Request(url, request.body, headers, method="POST")
        try:
            with self.opener.open(sent, timeout=self.options.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            answer = f"{exc.code} {_error_reason(exc)}"
            raise (_Retry if exc.code == 429 or exc.code >= 500 else _Refused)(answer) from None
        except urllib.error.URLError as exc:
            raise _Retry(_one_line(str(exc.reason))) from None
        except (OSError, http.client.HTTPException) as exc:  # timeouts, resets
            raise _Retry(_one_line(str(exc) or type(exc).__name__)) from None


def _error_reason(error: urllib.error.HTTPError) -> str:
    if 300 <= error.code < 400:
        return f"redirected to {error.headers.get('Location', '?')}"
    try:
        body = error.read()
    except (OSError, http.client.HTTPException):
        body = b""
    return _reason(body) or str(error.reason)


def _reason(body: bytes) -> str:
    """The server's reason in an error's body: Elasticsearch's type and reason, Solr's msg,
    or the body's first characters."""
    answer = _json(body)
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict) and ("type" in error or "reason" in error):
        text = f"{error.get('type') or 'error'}: {error.get('reason') or ''}"
    elif isinstance(error, dict) and "msg" in error:
        text = str(error["msg"])
    elif isinstance(error, str):
        text = error
    else:
        text = body.decode("utf-8", "replace")
    return _one_line(text)[:REASON_CHARS]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _json_line(value: Any) -> bytes:
    """UTF-8 JSON on one line for every reader: the line separators that JSON leaves
    unescaped (U+0085, U+2028, U+2029, which Python's splitlines and JavaScript break
    lines at) escaped."""
    line = orjson.dumps(value)
    for raw, escaped in _SEPARATORS:
        if raw in line:
            line = line.replace(raw, escaped)
    return line


def _no_check(body: bytes) -> None:
    """Any 2xx answer takes the batch."""


class _Op(NamedTuple):
    """An operation, encoded once when it is buffered."""

    deleted: bool
    id: str
    doc: bytes  # the document's JSON; empty for a delete
    line: bytes  # as a file holds it (ending in a newline); its size counts for the batch


class _File:
    """An appended file, a batch a write."""

    def __init__(self, writer: str, path: Path):
        self.writer, self.path = writer, path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._error(exc) from None

    def append(self, data: bytes) -> None:
        """The whole of `data`, or (if the write fails) none of it."""
        if self.fd is None:
            raise IndexWriterError(f"{self.writer}: {self.path} was closed")
        start = os.fstat(self.fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self._cut(start)
            raise self._error(exc) from None

    def sync(self) -> None:
        if self.fd is not None:
            try:
                os.fsync(self.fd)
            except OSError as exc:
                raise self._error(exc) from None

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def _cut(self, size: int) -> None:
        try:
            if self.fd is not None:
                os.ftruncate(self.fd, size)
        except OSError:
            pass  # the write's own error is the one to tell

    def _error(self, exc: OSError) -> IndexWriterError:
        return IndexWriterError(f"{self.writer}: cannot write {self.path}: {exc.strerror or exc}")


class _BatchWriter:
    """Buffers operations and sends them in batches to a file or an endpoint; a format
    (a subclass) encodes them and posts them."""

    name: ClassVar[str]  # the plugin's, for messages

    def __init__(self, target: Path | Endpoint, options: WriterOptions):
        self.options = options
        self.file = _File(self.name, target) if isinstance(target, Path) else None
        self.http = _Http(self.name, target, options) if isinstance(target, Endpoint) else None
        self.pending: list[_Op] = []
        self.pending_bytes = 0

    def add(self, documents: Sequence[Mapping[str, Any]]) -> None:
        for document in documents:
            self._buffer(self._add_op(document))

    def delete(self, ids: Sequence[str]) -> None:
        for id_ in ids:
            self._buffer(_Op(True, id_, b"", self._delete_line(id_)))

    def commit(self) -> None:
        self._send()
        if self.file is not None:
            if line := self._commit_line():
                self.file.append(line)
            self.file.sync()
        elif self.http is not None:
            self._commit_http(self.http)

    def close(self) -> None:
        self.pending, self.pending_bytes = [], 0
        if self.file is not None:
            self.file.close()

    def _add_op(self, document: Mapping[str, Any]) -> _Op:
        id_ = document.get("id")
        if not isinstance(id_, str) or not id_:
            raise IndexWriterError(f"{self.name}: a document has no id (its URL)")
        try:
            doc = _json_line(document if isinstance(document, dict) else dict(document))
        except orjson.JSONEncodeError as exc:
            raise IndexWriterError(f"{self.name}: document {id_} is not JSON: {exc}") from None
        return _Op(False, id_, doc, self._add_line(id_, doc))

    def _buffer(self, op: _Op) -> None:
        if self.pending and self.pending_bytes + len(op.line) > self.options.batch_bytes:
            self._send()
        self.pending.append(op)
        self.pending_bytes += len(op.line)
        if len(self.pending) >= self.options.batch_size:
            self._send()

    def _send(self) -> None:
        ops, self.pending, self.pending_bytes = self.pending, [], 0
        if not ops:
            return
        if self.file is not None:
            self.file.append(b"".join(op.line for op in ops))
        elif self.http is not None:
            self._post(self.http, ops)

    # the format's
    def _add_line(self, id_: str, doc: bytes) -> bytes:
        raise NotImplementedError

    def _delete_line(self, id_: str) -> bytes:
        raise NotImplementedError

    def _commit_line(self) -> bytes:
        return b""

    def _post(self, http: _Http, ops: list[_Op]) -> None:
        raise NotImplementedError

    def _commit_http(self, http: _Http) -> None:
        pass


def _batch(ops: Sequence[_Op]) -> str:
    return f"a batch of {len(ops)} document{'s' if len(ops) != 1 else ''}"


class JsonlWriter(_BatchWriter):
    """indexer-jsonl: a line a document, `{"id": ..., "deleted": true}` a delete; a file
    appended to, or application/x-ndjson POSTs to a URL."""

    name = "indexer-jsonl"

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> JsonlWriter:
        target = _configured(settings, "indexwriter.jsonl.target", cls.name)
        return cls(target, WriterOptions.from_settings(settings))

    def _add_line(self, id_: str, doc: bytes) -> bytes:
        return doc + b"\n"

    def _delete_line(self, id_: str) -> bytes:
        return _json_line({"id": id_, "deleted": True}) + b"\n"

    def _post(self, http: _Http, ops: list[_Op]) -> None:
        body = b"".join(op.line for op in ops)
        http.post(_Request("", body, NDJSON), _batch(ops), _no_check)


class ElasticWriter(_BatchWriter):
    """indexer-elastic: Elasticsearch's or OpenSearch's `_bulk` NDJSON, POSTed to
    {target}/_bulk (the target is the cluster's URL) or appended to a file; commit
    refreshes the index. A document's _id is its URL, or for one longer than
    Elasticsearch's 512 bytes, its beginning and a hash (the source's `id` stays the URL)."""

    name = "indexer-elastic"

    def __init__(self, target: Path | Endpoint, options: WriterOptions, index: str = "filbert"):
        super().__init__(target, options)
        self.index = index_name(index)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ElasticWriter:
        target = _configured(settings, "indexwriter.elastic.target", cls.name)
        try:
            index = index_name(settings["indexwriter.elastic.index"])
        except IndexWriterError as exc:
            raise IndexWriterError(f"{cls.name}: indexwriter.elastic.index: {exc}") from None
        return cls(target, WriterOptions.from_settings(settings), index)

    def _add_line(self, id_: str, doc: bytes) -> bytes:
        return self._action("index", id_) + doc + b"\n"

    def _delete_line(self, id_: str) -> bytes:
        return self._action("delete", id_)

    def _action(self, action: str, id_: str) -> bytes:
        return _json_line({action: {"_index": self.index, "_id": elastic_id(id_)}}) + b"\n"

    def _post(self, http: _Http, ops: list[_Op]) -> None:
        body = b"".join(op.line for op in ops)
        http.post(_Request("/_bulk", body, NDJSON), _batch(ops), _check_bulk)

    def _commit_http(self, http: _Http) -> None:
        path = f"/{quote(self.index, safe='')}/_refresh"
        refresh = _Request(path, b"", JSON, "ignore_unavailable=true")
        http.post(refresh, "the commit (refresh)", _no_check)


def elastic_id(id_: str) -> str:
    """A document's _id in Elasticsearch: its id, or for one longer than 512 bytes, its
    first characters and a hash of it all."""
    if len(id_.encode()) <= ELASTIC_ID_BYTES:
        return id_
    digest = hashlib.sha256(id_.encode()).hexdigest()[:32]
    head = id_.encode()[: ELASTIC_ID_BYTES - 33].decode("utf-8", "ignore")
    return f"{head}#{digest}"


def _check_bulk(body: bytes) -> None:
    """A `_bulk` answer took every operation; _Refused naming the first it refused (a
    delete of a missing document is no failure), _Retry when all it refused were 429s."""
    answer = _json(body)
    if not isinstance(answer, dict):
        raise _Refused(f"an answer that is no _bulk result: {_reason(body)}")
    if not answer.get("errors"):
        return
    failed = [(a, r) for a, r in map(_bulk_item, answer.get("items", ())) if _failed(a, r)]
    if not failed:
        return
    action, result = failed[0]
    error = result.get("error")
    reason = (
        f"{error.get('type') or 'error'}: {error.get('reason') or ''}"
        if isinstance(error, dict)
        else str(error)
    )
    first = f"{result.get('status')} {_one_line(reason)[:REASON_CHARS]}"
    message = f"{first} (document {result.get('_id')}, {action}; {len(failed)} refused)"
    every_429 = all(result.get("status") == 429 for _, result in failed)
    raise (_Retry if every_429 else _Refused)(message)


def _bulk_item(item: Any) -> tuple[str, dict[str, Any]]:
    """An item of a `_bulk` answer: its action and its result ({} if it is neither)."""
    if isinstance(item, dict) and len(item) == 1:
        action, result = next(iter(item.items()))
        if isinstance(result, dict):
            return action, result
    return "?", {}


def _failed(action: str, result: dict[str, Any]) -> bool:
    status = result.get("status")
    if not isinstance(status, int):
        return True
    return status >= 300 and not (action == "delete" and status == 404)


class SolrWriter(_BatchWriter):
    """indexer-solr: Solr's JSON update commands, POSTed to {target}/update (the target is
    a core's or collection's URL): a JSON array of documents for each run of adds,
    {"delete": [ids]} for each run of deletes, {"commit": {}} at commit. A file holds one
    command a line: {"add": {"doc": ...}}, {"delete": {"id": ...}}, {"commit": {}}."""

    name = "indexer-solr"

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SolrWriter:
        target = _configured(settings, "indexwriter.solr.target", cls.name)
        return cls(target, WriterOptions.from_settings(settings))

    def _add_line(self, id_: str, doc: bytes) -> bytes:
        return b'{"add":{"doc":' + doc + b"}}\n"

    def _delete_line(self, id_: str) -> bytes:
        return _json_line({"delete": {"id": id_}}) + b"\n"

    def _commit_line(self) -> bytes:
        return b'{"commit":{}}\n'

    def _post(self, http: _Http, ops: list[_Op]) -> None:
        for deleted, run in itertools.groupby(ops, key=lambda op: op.deleted):
            run_ops = list(run)
            if deleted:
                body = _json_line({"delete": [op.id for op in run_ops]})
            else:
                body = b"[" + b",".join(op.doc for op in run_ops) + b"]"
            http.post(_Request("/update", body, JSON), _batch(run_ops), _check_solr)

    def _commit_http(self, http: _Http) -> None:
        http.post(_Request("/update", b'{"commit":{}}', JSON), "the commit", _check_solr)


def _check_solr(body: bytes) -> None:
    """Solr's answer says status 0; _Refused with its status and message if not."""
    answer = _json(body)
    header = answer.get("responseHeader") if isinstance(answer, dict) else None
    status = header.get("status") if isinstance(header, dict) else None
    if status is None:
        raise _Refused(f"an answer that is no Solr response: {_reason(body)}")
    if status != 0:
        raise _Refused(f"{status} {_reason(body)}")
