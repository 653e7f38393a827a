"""Credentials for the sites that want them: HTTP Basic and Digest, and login forms, read from
the TOML file `http.auth.file` names.

    # HTTP authentication for the URLs under `url` (or for all of `host`, name:port as
    # crawled). scheme: "basic" (sent with the first request), "digest", or "any" (libcurl
    # answers whatever the server asks). With `realm`, the credentials go only where the
    # server asked for that realm: the first request goes without, and a 401 naming it is
    # asked again with them (then the rest of `url` gets them at once).
    [[http]]
    url = "https://intranet.example.com/private/"
    scheme = "digest"
    realm = "Staff"            # optional
    user = "crawler"
    password = "secret"

    # A login form, posted once per host and fetch round before the host's first page; the
    # session cookie it sets goes with the host's requests (http.cookies must be on).
    # `success_text` (in the page the login ends on) or `success_cookie` (a cookie the login
    # set) tells that it worked. URLs of the host matching `skip` are never fetched: the
    # default keeps the crawler off logout links.
    [[login]]
    url = "https://app.example.com/session"          # where the form posts
    fields = { username = "crawler", password = "secret" }
    success_text = "Sign out"
    skip = "(?i)log-?out|sign-?out|log-?off"        # optional (this is the default)

A failed login is a host's failure: its pages are fetched in a later round (a retry, not
gone), as are pages answered 401 in spite of the credentials. The passwords and fields stay
in memory: no message, log, segment or output shows them, and the pages of a host with
credentials are stored without the cookies its answers set.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pycurl

from filbert.config import ConfigError
from filbert.urls import host_of

SCHEMES = {
    "basic": pycurl.HTTPAUTH_BASIC,
    "digest": pycurl.HTTPAUTH_DIGEST,
    "any": pycurl.HTTPAUTH_ANY,
}
LOGOUT = r"(?i)log-?out|sign-?out|log-?off"
_REALM = re.compile(r'realm\s*=\s*"((?:[^"\\]|\\.)*)"|realm\s*=\s*([^\s,]+)', re.IGNORECASE)


@dataclass(frozen=True)
class Credentials:
    """A user and password for a host's URLs under `prefix` (all of them: '')."""

    host: str
    prefix: str
    scheme: str
    user: str
    password: str = field(repr=False)
    realm: str | None = None

    @property
    def curl_auth(self) -> int:
        return SCHEMES[self.scheme]

    def answering(self, challenge: str | None) -> Credentials:
        """These credentials in the scheme the challenge asks for ("any" made definite)."""
        asked = (challenge or "").split(" ", 1)[0].lower()
        if self.scheme == "any" and asked in ("basic", "digest"):
            return replace(self, scheme=asked)
        return self

    def asked_for(self, challenge: str | None) -> bool:
        """Whether a WWW-Authenticate challenge names this realm (any, when none is set)."""
        if self.realm is None:
            return True
        return any(self.realm in (quoted, bare) for quoted, bare in _REALM.findall(challenge or ""))


@dataclass(frozen=True)
class Login:
    """A login form of a host."""

    host: str
    url: str
    fields: Mapping[str, str] = field(repr=False)
    success_text: str | None
    success_cookie: str | None
    skip: re.Pattern[str]

    def succeeded(self, page: bytes, cookies: list[str]) -> bool:
        """Whether the page a login ended on, and the host's cookies then, say it worked."""
        if self.success_text is not None and self.success_text.encode() not in page:
            return False
        names = {line.split("\t")[5] for line in cookies if line.count("\t") >= 6}
        return self.success_cookie is None or self.success_cookie in names


class AuthFile:
    """The credentials and logins of http.auth.file (none when it is empty)."""

    def __init__(self, credentials: list[Credentials], logins: list[Login]):
        self.credentials = sorted(credentials, key=lambda c: len(c.prefix), reverse=True)
        self.logins = {login.host: login for login in logins}
        self.hosts = {c.host for c in credentials} | set(self.logins)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> AuthFile:
        path = settings["http.auth.file"]
        return cls.read(Path(path)) if path else cls([], [])

    @classmethod
    def read(cls, path: Path) -> AuthFile:
        """The file's entries; ConfigError saying what is wrong (never what it holds)."""
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"http.auth.file {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"http.auth.file {path}: not TOML ({exc})") from None
        unknown = set(data) - {"http", "login"}
        if unknown:
            raise ConfigError(f"http.auth.file {path}: unknown tables {sorted(unknown)}")
        credentials = [
            _credentials(entry, f"{path} [[http]] #{i + 1}")
            for i, entry in enumerate(_tables(data, "http", path))
        ]
        logins = [
            _login(entry, f"{path} [[login]] #{i + 1}")
            for i, entry in enumerate(_tables(data, "login", path))
        ]
        return cls(credentials, logins)

    def for_url(self, url: str, host: str) -> Credentials | None:
        """The credentials of the URL's host with the longest prefix it is under, if any."""
        return next((c for c in self.credentials if c.host == host and _under(url, c.prefix)), None)


def _under(url: str, prefix: str) -> bool:
    return not prefix or (
        url.startswith(prefix)
        and (len(url) == len(prefix) or prefix.endswith("/") or url[len(prefix)] in "/?#")
    )


def _tables(data: dict[str, Any], name: str, path: Path) -> list[dict[str, Any]]:
    tables = data.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"http.auth.file {path}: {name} must be [[{name}]] tables")
    return tables


def _text(entry: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value and key != "password"):
        raise ConfigError(f"http.auth.file {where}: {key} must be a string")
    return value


def _host_and_prefix(entry: dict[str, Any], where: str) -> tuple[str, str]:
    url, host = entry.get("url"), entry.get("host")
    if isinstance(url, str) and re.match(r"https?://[^/?#]+", url) and host is None:
        return host_of(url), url
    if (
        isinstance(host, str)
        and re.fullmatch(r"[\w.\-]+(:\d+)?|\[[\w:]+\](:\d+)?", host)
        and url is None
    ):
        return host.lower(), ""
    raise ConfigError(f"http.auth.file {where}: give url (http(s)://host/...) or host (name:port)")


def _credentials(entry: dict[str, Any], where: str) -> Credentials:
    _known(entry, {"url", "host", "scheme", "realm", "user", "password"}, where)
    scheme = entry.get("scheme", "any")
    if scheme not in SCHEMES:
        raise ConfigError(f"http.auth.file {where}: scheme must be one of {sorted(SCHEMES)}")
    host, prefix = _host_and_prefix(entry, where)
    user, password = _text(entry, "user", where), _text(entry, "password", where)
    assert user is not None and password is not None
    return Credentials(host, prefix, scheme, user, password, _text(entry, "realm", where, False))


def _login(entry: dict[str, Any], where: str) -> Login:
    _known(entry, {"url", "host", "fields", "success_text", "success_cookie", "skip"}, where)
    url = entry.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/?#]+", url):
        raise ConfigError(f"http.auth.file {where}: url must be the http(s) URL the form posts to")
    fields = entry.get("fields")
    if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
        raise ConfigError(f"http.auth.file {where}: fields must be a table of strings")
    success_text = _text(entry, "success_text", where, False)
    success_cookie = _text(entry, "success_cookie", where, False)
    if success_text is None and success_cookie is None:
        raise ConfigError(f"http.auth.file {where}: give success_text or success_cookie")
    try:
        skip = re.compile(entry.get("skip", LOGOUT))
    except (re.error, TypeError) as exc:
        raise ConfigError(
            f"http.auth.file {where}: skip is not a regular expression ({exc})"
        ) from None
    host = entry.get("host", host_of(url))
    if not isinstance(host, str):
        raise ConfigError(f"http.auth.file {where}: host must be a string")
    return Login(host, url, dict(fields), success_text, success_cookie, skip)


def _known(entry: dict[str, Any], keys: set[str], where: str) -> None:
    unknown = set(entry) - keys
    if unknown:
        raise ConfigError(f"http.auth.file {where}: unknown keys {sorted(unknown)}")
