"""parsechecker: fetch and parse one URL and show what the crawler would see (Nutch's ParserChecker).

The URL goes through the real fetcher (robots.txt obeyed, our User-Agent, the content
limit, redirects followed as in a fetch round up to http.redirect.max, its proxy, cookies,
credentials and rendering) and the real parser; nothing is written anywhere. Its host's
cookies are the crawl's, when a crawl directory is given (a fresh jar otherwise), and are
not saved. The report says how the page was reached: through which proxy, with how many
cookies, which credentials or login, and whether a browser rendered it (`render` renders it
whatever fetcher.render.* say).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from filbert import schemas
from filbert.analysis.topic import topic_of
from filbert.config import Settings, masked
from filbert.fetch.auth import AuthFile
from filbert.fetch.cookies import CookieJars, load_jars
from filbert.fetch.fetcher import FetchItem, FetchResult, origin_of, run_fetcher
from filbert.fetch.proxies import ProxyRules
from filbert.fetch.robots import RobotRules, RobotsCache
from filbert.mediatypes import parse_types
from filbert.parse import content_kind, decode_html, decode_text, limit_setting, parse_content
from filbert.parse.sandbox import sandbox_for
from filbert.urls import UrlFilter, bucket_of, fingerprint, host_of, normalize_url


class _RecordingRobotsCache(RobotsCache):
    """A robots cache that also remembers every rule set the fetcher obtained (failures too)."""

    def __init__(self, ttl: float):
        super().__init__(ttl)
        self.seen: dict[str, RobotRules] = {}

    def put(self, origin: str, rules: RobotRules) -> None:
        self.seen[origin] = rules
        super().put(origin, rules)


def _fetch(
    url: str, settings: Settings, jars: CookieJars | None
) -> tuple[list[FetchResult], dict[str, RobotRules]]:
    """Fetch one URL through the fetcher; every result it reports (redirect hops first).
    A check is one visit, as a person's: robots.txt, the page and its redirects follow
    each other without fetcher.server.delay between them."""
    results: list[FetchResult] = []
    item = FetchItem(url=url, fp=fingerprint(url), host=host_of(url), score=1.0)
    robots = _RecordingRobotsCache(settings["http.robots.cache.ttl"])
    visit = Settings({**settings, "fetcher.server.delay": 0.0})
    run_fetcher([item], visit, 1, results.append, robots, cookies=jars)
    return results, robots.seen


def _jars(settings: Settings, crawl_dir: Path | None, host: str) -> CookieJars | None:
    """The cookie jars a check uses: the crawl's for the host, if given (never saved)."""
    if not settings["http.cookies"]:
        return None
    saved = {}
    if crawl_dir is not None:
        from filbert.storage import CrawlDir

        crawl = CrawlDir(crawl_dir)
        saved = load_jars(crawl.cookies_dir, [bucket_of(host, crawl.buckets(settings))])
    return CookieJars(saved, settings["http.cookies.max.per.host"])


def _access(
    settings: Settings, final: FetchResult | None, jars: CookieJars | None
) -> dict[str, Any]:
    """How the page was reached: proxy, cookies, credentials, login, rendering."""
    url, host = (final.item.url, final.item.host) if final else ("", "")
    proxy = ProxyRules.from_settings(settings).for_host(host) if final else None
    auth = AuthFile.from_settings(settings)
    credentials = auth.for_url(url, host) if final else None
    login = auth.logins.get(host)
    return {
        "proxy": masked(proxy) if proxy else None,
        "cookies": None if jars is None or not final else len(jars.lines_of(host)),
        "credentials": None
        if credentials is None
        else f"{credentials.scheme} for {credentials.prefix or credentials.host}",
        "login": None if login is None else login.url,
        "rendered": bool(final and final.rendered),
    }


def _robots_report(rules: RobotRules | None, url: str, agent: str) -> dict[str, Any]:
    if rules is None:
        return {"checked": False, "allowed": None, "reason": "", "crawl_delay": None}
    return {
        "checked": True,
        "allowed": rules.allowed(url, agent),
        "reason": rules.reason,
        "crawl_delay": rules.crawl_delay(agent),
    }


def _fetch_report(result: FetchResult) -> dict[str, Any]:
    return {
        "url": result.item.url,
        "status": result.status,
        "http_status": result.http_status,
        "message": result.message,
        "redirect_url": result.redirect_url,
        "content_type": result.content_type,
        "content_length": None if result.content is None else len(result.content),
        "truncated": result.truncated,
        # the setting whose limit cut the body
        "truncated_at": limit_setting(content_kind(result.content_type, result.content or b""))
        if result.truncated
        else None,
        "fetch_time": result.fetch_time.isoformat(),
        "headers": result.headers or {},
    }


def _encoding(url: str, content: bytes, content_type: str | None, kind: str | None) -> str | None:
    """The character encoding of a web page or text; None for other kinds."""
    if kind not in ("html", "text"):
        return None
    decode = decode_text if kind == "text" else decode_html
    return decode(content, content_type, url)[1]


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def check_url(
    url: str,
    settings: Settings,
    text_chars: int = 500,
    render: bool = False,
    crawl_dir: Path | None = None,
) -> dict[str, Any]:
    """Fetch and parse `url`; a JSON-ready report. text_chars < 0 keeps the whole text."""
    url = normalize_url(url)
    if render:
        settings = Settings({**settings, "fetcher.render.patterns": f"^{re.escape(url)}$"})
    url_filter = UrlFilter.from_settings(settings)
    agent = settings["http.agent.name"]
    jars = _jars(settings, crawl_dir, host_of(url))
    try:
        results, robots = _fetch(url, settings, jars)
        access = _access(settings, results[-1] if results else None, jars)
    finally:
        if jars is not None:
            jars.close()
    hops = [_fetch_report(r) for r in results]
    for hop, result in zip(hops, results):
        hop["robots"] = _robots_report(
            robots.get(origin_of(result.item.url)), result.item.url, agent
        )
    final = results[-1] if results else None
    report: dict[str, Any] = {
        "url": url,
        "url_filter": url_filter.accepts(url),
        "robots": _robots_report(robots.get(origin_of(url)), url, agent),
        "redirects": hops[:-1],
        "fetch": hops[-1] if hops else None,
        "access": access,
        "parse": None,
    }
    if final is None or final.content is None:
        return report
    kind = content_kind(final.content_type, final.content)
    parsed = parse_content(
        final.item.url,
        final.content,
        final.content_type,
        final.headers,
        agent,
        parse_types(settings["parser.types"]),
        final.truncated,
        sandbox_for(settings),
    )
    text = parsed.text if text_chars < 0 else parsed.text[:text_chars]
    report["parse"] = {
        "status": parsed.status,
        "message": parsed.message,
        "kind": kind,
        "encoding": _encoding(final.item.url, final.content, final.content_type, kind)
        if parsed.status == schemas.PARSE_SUCCESS
        else None,
        "title": parsed.title,
        "description": parsed.description,
        "author": parsed.author,
        "published": _iso(parsed.published),
        "modified": _iso(parsed.modified),
        "refresh": parsed.refresh,
        "alternates": [{"lang": lang, "url": url} for lang, url in parsed.alternates],
        "noindex": parsed.noindex,
        "nofollow": parsed.nofollow,
        "outlinks": [
            {"url": link, "anchor": anchor, "filtered": not url_filter.accepts(link)}
            for link, anchor in parsed.outlinks
        ],
        "text_length": len(parsed.text),
        "text": text,
    }
    if (topic := topic_of(settings["focus.topic"])) and parsed.status == schemas.PARSE_SUCCESS:
        report["parse"]["relevance"] = round(topic.relevance(parsed.title, parsed.text), 4)
    return report


def succeeded(report: dict[str, Any]) -> bool:
    """Whether the page was fetched and parsed."""
    parse = report["parse"]
    return parse is not None and parse["status"] == schemas.PARSE_SUCCESS


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _robots_line(robots: dict[str, Any]) -> str:
    if not robots["checked"]:
        return "not checked"
    line = "allowed" if robots["allowed"] else "DISALLOWED: the page was not requested"
    if robots["reason"]:
        line += f" ({robots['reason']})"
    if robots["crawl_delay"] is not None:
        line += f", crawl-delay {robots['crawl_delay']:g} s"
    return line


def _fetch_lines(fetch: dict[str, Any]) -> list[str]:
    lines = [
        f"fetch status:  {fetch['status']}" + (f" ({fetch['message']})" if fetch["message"] else "")
    ]
    if fetch["http_status"]:
        lines.append(f"HTTP status:   {fetch['http_status']}")
    if fetch["redirect_url"]:
        lines.append(f"redirect to:   {fetch['redirect_url']}")
    if fetch["content_type"]:
        lines.append(f"content type:  {fetch['content_type']}")
    if fetch["content_length"] is not None:
        lines.append(
            f"content:       {fetch['content_length']} bytes"
            + (f" (truncated at {fetch['truncated_at']})" if fetch["truncated"] else "")
        )
    return lines


def _access_lines(access: dict[str, Any]) -> list[str]:
    lines = [f"proxy:         {access['proxy'] or 'none (direct)'}"]
    if access["cookies"] is not None:
        lines.append(f"cookies:       {access['cookies']} in the host's jar")
    if access["credentials"]:
        lines.append(f"credentials:   {access['credentials']} (http.auth.file)")
    if access["login"]:
        lines.append(f"login:         {access['login']} (http.auth.file)")
    lines.append(f"rendered:      {_yes(access['rendered'])}")
    return lines


def format_report(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    lines = [
        f"url:           {report['url']}",
        f"url filter:    {'accepted' if report['url_filter'] else 'REJECTED (a crawl would not fetch it)'}",
        f"robots.txt:    {_robots_line(report['robots'])}",
    ]
    for hop in report["redirects"]:
        lines.append(f"redirect:      {hop['http_status']} {hop['url']} -> {hop['redirect_url']}")
    fetch = report["fetch"]
    if fetch is None:
        lines.append("fetch status:  (nothing fetched)")
        return "\n".join(lines)
    if report["redirects"]:
        lines.append(f"final url:     {fetch['url']}")
        if fetch["robots"] != report["robots"]:
            lines.append(f"robots.txt:    {_robots_line(fetch['robots'])}")
    lines += _fetch_lines(fetch) + _access_lines(report["access"])
    parse = report["parse"]
    if parse is None:
        return "\n".join(lines)
    lines.append(
        f"parse status:  {parse['status']}" + (f" ({parse['message']})" if parse["message"] else "")
    )
    if parse["status"] != schemas.PARSE_SUCCESS:
        return "\n".join(lines)
    lines += [f"kind:          {parse['kind']}"]
    if parse["encoding"]:
        lines.append(f"encoding:      {parse['encoding']}")
    lines.append(f"title:         {parse['title']}")
    if "relevance" in parse:
        lines.append(f"relevance:     {parse['relevance']} (to focus.topic)")
    metadata = ("description", "author", "published", "modified", "refresh")
    lines += [f"{name + ':':<15}{parse[name]}" for name in metadata if parse[name]]
    lines += [f"alternate:     {a['lang']} {a['url']}" for a in parse["alternates"]]
    lines += [
        f"noindex:       {_yes(parse['noindex'])}",
        f"nofollow:      {_yes(parse['nofollow'])}",
        f"outlinks:      {len(parse['outlinks'])}"
        + (
            f" ({sum(o['filtered'] for o in parse['outlinks'])} rejected by the URL filter)"
            if any(o["filtered"] for o in parse["outlinks"])
            else ""
        ),
    ]
    for link in parse["outlinks"]:
        mark = "  [filtered]" if link["filtered"] else ""
        lines.append(f"  {link['url']}{mark}" + (f'  "{link["anchor"]}"' if link["anchor"] else ""))
    shown = len(parse["text"])
    lines.append(
        f"text:          {parse['text_length']} characters"
        + (f", first {shown} shown" if shown < parse["text_length"] else "")
    )
    if parse["text"]:
        lines.append(parse["text"])
    return "\n".join(lines)
