"""robots.txt: fetched once per host and fetch run, parsed and matched as RFC 9309 says.

The parser and matcher follow Google's open-source robots.txt parser (google/robotstxt,
robots.cc) exactly, including its leniencies: a leading (even partial) UTF-8 BOM is skipped,
lines end at \\n, \\r\\n or \\r, a line is cut after 8 * 2083 bytes, keys are case-insensitive
prefixes with frequent typos accepted ("disalow", "useragent", "user agent"), a missing colon
is accepted ("disallow /"), a user-agent value counts up to its first character outside
[a-zA-Z_-], the longest matching pattern wins (Allow on ties) and an allowed ".../index.html"
also allows ".../". On top of that: Crawl-delay per group and the Sitemap list.

Status codes (RFC 9309 §2.3.1): 2xx: parse the body; 4xx: no restrictions, except 429 which,
like a 5xx answer or an unreachable server, means full disallow for now (the fetcher retries
those URLs in a later round).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

# Google: "any valid line isn't going to be more than many times" the 2083 byte URL limit.
MAX_LINE_LEN = 2083 * 8
_LINE_KEEP = MAX_LINE_LEN - 1  # robots.cc keeps one byte of its buffer for the final NUL

USER_AGENT = "user-agent"
ALLOW = "allow"
DISALLOW = "disallow"
SITEMAP = "sitemap"
CRAWL_DELAY = "crawl-delay"  # unknown to Google's parser (HandleUnknownAction)
UNKNOWN = "unknown"

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_PCT_OR_HIGH = re.compile(rb"%[0-9A-Fa-f]{2}|[\x80-\xff]")
_PRODUCT = re.compile(r"[A-Za-z_-]*")
_PATH_START = re.compile(r"[/?;]")
_HTTP_AUTHORITY = re.compile(r"https?://[^/?;]*").match
_BOM = b"\xef\xbb\xbf"
_DISALLOW_TYPOS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")


class Directive(NamedTuple):
    """One recognised `key: value` line. Allow/Disallow values are already percent-escaped."""

    line: int  # 1-based line number
    kind: str  # USER_AGENT, ALLOW, DISALLOW, SITEMAP, CRAWL_DELAY or UNKNOWN
    key: str  # the key as written
    value: str


# -- the parser ------------------------------------------------------------------


def _escape_sub(match: re.Match[bytes]) -> bytes:
    text = match.group()
    return text.upper() if len(text) == 3 else b"%%%02X" % text[0]


def _escape(value: bytes) -> str:
    """robots.cc MaybeEscapePattern: %-escape octets >= 0x80, upper-case existing escapes."""
    if b"%" in value or not value.isascii():
        value = _PCT_OR_HIGH.sub(_escape_sub, value)
    return value.decode("ascii")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # lone surrogates that did not come from undecodable bytes
        return text.encode("utf-8", "replace")


def maybe_escape_pattern(pattern: str) -> str:
    """robots.cc MaybeEscapePattern on a text pattern (its UTF-8 octets)."""
    return _escape(_utf8(pattern))


def _key_value(line: bytes) -> tuple[bytes, bytes] | None:
    """robots.cc GetKeyAndValueFrom: `key: value`, or `key value` (exactly two words)."""
    hash_pos = line.find(b"#")
    if hash_pos >= 0:
        line = line[:hash_pos]
    line = line.strip()
    sep = line.find(b":")
    if sep < 0:
        space, tab = line.find(b" "), line.find(b"\t")
        sep = tab if space < 0 or 0 <= tab < space else space
        if sep < 0:
            return None
        rest = line[sep:].lstrip(b" \t")
        if b" " in rest or b"\t" in rest:
            return None
    key = line[:sep].strip()
    if not key:
        return None
    return key, line[sep + 1 :].strip()


def _kind(key: bytes) -> str:
    key = key.lower()
    if key.startswith((b"user-agent", b"useragent", b"user agent")):
        return USER_AGENT
    if key.startswith(b"allow"):
        return ALLOW
    if key.startswith(_DISALLOW_TYPOS):
        return DISALLOW
    if key.startswith((b"sitemap", b"site-map")):
        return SITEMAP
    if key.startswith(b"crawl-delay"):
        return CRAWL_DELAY
    return UNKNOWN


def parse_directives(body: bytes | str) -> list[Directive]:
    """The recognised lines of a robots.txt, in order (robots.cc ParseRobotsTxt)."""
    if isinstance(body, str):
        body = _utf8(body)
    # a BOM, or a prefix of one, is skipped at the start of the file only
    if body[:1] == _BOM[:1]:
        body = body[3:] if body[:3] == _BOM else body[2:] if body[:2] == _BOM[:2] else body[1:]
    directives = []
    for number, line in enumerate(_LINE_BREAK.split(body), 1):
        if len(line) > _LINE_KEEP:
            line = line[:_LINE_KEEP]
        if b"\0" in line:  # robots.cc works on C strings
            line = line[: line.index(b"\0")]
        pair = _key_value(line)
        if pair is None:
            continue
        key, value = pair
        kind = _kind(key)
        if kind in (ALLOW, DISALLOW):
            text = _escape(value)
        else:
            text = value.decode("utf-8", "replace")
        directives.append(Directive(number, kind, key.decode("utf-8", "replace"), text))
    return directives


# -- URLs and user agents --------------------------------------------------------


def get_path_params_query(url: str) -> str:
    """robots.cc GetPathParamsQuery: path, params and query of a URL; always starts with '/'."""
    authority = _HTTP_AUTHORITY(url)
    if authority is not None:  # the common case, same result as below
        path_start = authority.end()
        hash_pos = url.find("#")
        if path_start == len(url) or 0 <= hash_pos < path_start:
            return "/"
        path = url[path_start:hash_pos] if hash_pos >= 0 else url[path_start:]
        return path if path[0] == "/" else "/" + path
    return _path_params_query(url)


def _path_params_query(url: str) -> str:
    start = 2 if url.startswith("//") else 0
    early = _PATH_START.search(url, start)
    protocol_end = url.find("://", start)
    if protocol_end < 0 or (early is not None and early.start() < protocol_end):
        protocol_end = start
    else:
        protocol_end += 3
    found = _PATH_START.search(url, protocol_end)
    if found is None:
        return "/"
    path_start = found.start()
    hash_pos = url.find("#", start)
    if 0 <= hash_pos < path_start:
        return "/"
    path = url[path_start:hash_pos] if hash_pos >= 0 else url[path_start:]
    return path if path[0] == "/" else "/" + path


def extract_user_agent(value: str) -> str:
    """The leading [a-zA-Z_-] characters of a user-agent value ("Foo Bar/1.0" -> "Foo")."""
    product = _PRODUCT.match(value)
    assert product is not None  # the pattern matches the empty string, so always matches
    return product.group()


def is_valid_user_agent_to_obey(agent: str | None) -> bool:
    """A product token we can obey: non-empty and only [a-zA-Z_-]."""
    if not agent:
        return False
    return extract_user_agent(agent) == agent


# -- matching ----------------------------------------------------------------------

_PREFIX, _EXACT, _GLOB = 0, 1, 2

# A compiled rule: (priority, allow, kind, literal, middle, last, anchored). priority is the
# pattern's length in octets; literal is the whole pattern for _PREFIX and _EXACT ("...$")
# rules, the part before the first '*' for _GLOB rules, followed by the literal parts
# between the '*'s, the part after the last '*', and whether a '$' ends the pattern.
_Rule = tuple[int, bool, int, str, tuple[str, ...], str, bool]


def _compile(pattern: str, allow: bool) -> _Rule:
    """A rule for a pattern: '*' matches any characters, '$' at the end anchors it."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    if "*" not in body:
        return (len(pattern), allow, _EXACT if anchored else _PREFIX, body, (), "", anchored)
    parts = body.split("*")
    middle = tuple(part for part in parts[1:-1] if part)
    return (len(pattern), allow, _GLOB, parts[0], middle, parts[-1], anchored)


def _glob_matches(path: str, rule: _Rule) -> bool:
    """robots.cc Matches for a pattern with '*': O(len(path) * len(pattern)) at worst."""
    _, _, _, literal, middle, last, anchored = rule
    if not path.startswith(literal):
        return False
    pos = len(literal)
    for part in middle:  # leftmost matches leave the most room for the rest
        pos = path.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return path.find(last, pos) >= 0


def _first_match(rules: list[_Rule], path: str) -> _Rule | None:
    """The first rule that matches: the best one, as the list is sorted best first."""
    for rule in rules:
        kind = rule[2]
        if kind == _PREFIX:
            if path.startswith(rule[3]):
                return rule
        elif kind == _EXACT:
            if path == rule[3]:
                return rule
        elif _glob_matches(path, rule):
            return rule
    return None


class _RuleList:
    """Rules sorted best first, with the literal prefixes one of them needs to match."""

    __slots__ = ("gate", "rules")

    def __init__(self, rules: list[_Rule]):
        self.rules = rules
        self.gate = tuple({rule[3] for rule in rules})


_BUCKET_KEY = 4  # rule lists longer than _BUCKET_MIN are indexed by this many
_BUCKET_MIN = 8  # leading literal characters


class _Matcher:
    """The rules that apply to one agent, longest first (Allow before Disallow on ties)."""

    def __init__(self, patterns: list[tuple[bool, str]]):
        rules = set()
        for allow, pattern in patterns:
            if not pattern:
                continue  # an empty pattern has priority 0: same as no match
            rules.add(_compile(pattern, allow))
            if allow:
                # Google: an allowed ".../index.htm[l]" also allows ".../" (robots.cc HandleAllow)
                slash = pattern.rfind("/")
                if slash >= 0 and pattern.startswith("/index.htm", slash):
                    rules.add(_compile(pattern[: slash + 1] + "$", True))
        ordered = sorted(rules, key=lambda r: (-r[0], not r[1], r))
        self.empty = not ordered
        short = ordered
        buckets: dict[str, list[_Rule]] = {}
        if len(ordered) > _BUCKET_MIN:
            short = []
            for rule in ordered:  # stays sorted within each list
                if len(rule[3]) >= _BUCKET_KEY:
                    buckets.setdefault(rule[3][:_BUCKET_KEY], []).append(rule)
                else:
                    short.append(rule)
        self.short = _RuleList(short)
        self.buckets = {key: _RuleList(bucket) for key, bucket in buckets.items()}

    def allowed(self, path: str) -> bool:
        best = None
        if path.startswith(self.short.gate):
            best = _first_match(self.short.rules, path)
        bucket = self.buckets.get(path[:_BUCKET_KEY]) if self.buckets else None
        if bucket is not None and path.startswith(bucket.gate):
            rule = _first_match(bucket.rules, path)
            if rule is not None and (best is None or rule[:2] > best[:2]):
                best = rule
        return best is None or best[1]


def _crawl_delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


class _Group:
    __slots__ = ("agents", "crawl_delay", "is_global", "rules")

    def __init__(self) -> None:
        self.agents: set[str] = set()  # lower-cased product tokens
        self.is_global = False  # has a "User-agent: *" line
        self.rules: list[tuple[bool, str]] = []
        self.crawl_delay: float | None = None


class RobotsTxt:
    """A parsed robots.txt: its groups, rules compiled per agent on first use, and sitemaps."""

    def __init__(self, body: bytes | str):
        self.groups: list[_Group] = []
        self.sitemaps: list[str] = []
        self._selected: dict[str, tuple[_Matcher, float | None]] = {}
        group, separated = None, False
        for directive in parse_directives(body):
            kind, value = directive.kind, directive.value
            if kind == USER_AGENT:
                if group is None or separated:  # rules or other lines end a group's agent list
                    group, separated = _Group(), False
                    self.groups.append(group)
                # Google: "*" followed by a space and more is still the global agent
                if value[:1] == "*" and (len(value) == 1 or value[1] in " \t\n\v\f\r"):
                    group.is_global = True
                else:
                    group.agents.add(extract_user_agent(value).lower())
                continue
            separated = True
            if kind == SITEMAP:
                self._add_sitemap(value)
            elif group is None:
                continue  # rules outside groups are ignored
            elif kind in (ALLOW, DISALLOW):
                group.rules.append((kind == ALLOW, value))
            elif kind == CRAWL_DELAY and group.crawl_delay is None:
                group.crawl_delay = _crawl_delay(value)

    def _add_sitemap(self, url: str) -> None:
        try:
            parts = urlsplit(url)
        except ValueError:
            return
        if parts.scheme.lower() in ("http", "https") and parts.netloc and url not in self.sitemaps:
            self.sitemaps.append(url)

    def _select(self, agent: str) -> tuple[_Matcher, float | None]:
        """The groups naming the agent, or else the "*" groups, merged into one matcher."""
        selected = self._selected.get(agent)
        if selected is None:
            token = agent.lower() if agent.isascii() else None  # ASCII case-insensitive
            groups = [g for g in self.groups if token in g.agents]
            if not groups:
                groups = [g for g in self.groups if g.is_global]
            delays = [g.crawl_delay for g in groups if g.crawl_delay is not None]
            matcher = _Matcher([rule for g in groups for rule in g.rules])
            selected = self._selected[agent] = (matcher, delays[0] if delays else None)
        return selected

    def allowed(self, url: str, agent: str) -> bool:
        """Whether the agent (a product token) may fetch the URL (already %-encoded)."""
        selected = self._selected.get(agent) or self._select(agent)
        matcher = selected[0]
        return matcher.empty or matcher.allowed(get_path_params_query(url))

    def crawl_delay(self, agent: str) -> float | None:
        return self._select(agent)[1]


# -- the fetcher's interface ---------------------------------------------------------


@dataclass(frozen=True)
class RobotRules:
    parser: RobotsTxt | None  # None: no file rules apply (allow_all says allow or deny all)
    allow_all: bool
    reason: str = ""

    @property
    def unavailable(self) -> bool:
        """Everything denied for now because robots.txt could not be had (retry later)."""
        return self.parser is None and not self.allow_all

    @property
    def sitemaps(self) -> list[str]:
        """Absolute http(s) URLs from Sitemap: lines anywhere in the file, in order."""
        return list(self.parser.sitemaps) if self.parser is not None else []

    def allowed(self, url: str, agent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.allowed(url, agent)

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        return self.parser.crawl_delay(agent)


ALLOW_ALL = RobotRules(None, True)


def rules_from_response(status: int | None, body: bytes, error: str = "") -> RobotRules:
    """Rules for a robots.txt answer; status None means the server was unreachable."""
    if status is None:
        return RobotRules(None, False, f"robots.txt unreachable: {error}")
    if 200 <= status < 300:
        return RobotRules(RobotsTxt(body or b""), True)
    if status == 429:
        return RobotRules(None, False, "robots.txt answered HTTP 429 (too many requests)")
    if 400 <= status < 500:
        return ALLOW_ALL
    return RobotRules(None, False, f"robots.txt answered HTTP {status}")


class RobotsCache:
    """Rules per origin that outlive one fetch run, for `http.robots.cache.ttl` seconds.

    Failures (deny-all because the server did not answer) are not kept, so the next run asks again.
    """

    def __init__(self, ttl: float):
        self.ttl = ttl
        self.entries: dict[str, tuple[float, RobotRules]] = {}

    def get(self, origin: str) -> RobotRules | None:
        entry = self.entries.get(origin)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, origin: str, rules: RobotRules) -> None:
        if not rules.unavailable:
            self.entries[origin] = (time.monotonic() + self.ttl, rules)
