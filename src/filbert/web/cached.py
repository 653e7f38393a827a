"""GET /cache: filbert's cached copy of a page, as a search engine shows one.

`/cache?url=URL` is an HTML page of filbert's own: a banner ("This is filbert's cached copy
of URL as fetched on DATE", links to the live page and to the text-only version) over the
page as it was fetched. `/cache?url=URL&view=text` is the text-only version: the page's
title and text as the parser read them, a paragraph a block. A document a browser does not
show as a page (a PDF, a feed, an office file) is always shown so; a plain-text one as its
text, preformatted.

How the stored page is shown: in an `<iframe sandbox srcdoc="...">` under the banner. The
page (decoded from its stored encoding, as the parser read it) is the value of an attribute,
escaped, so nothing in it (`</iframe>`, a `<script>`, an unclosed comment, `<plaintext>`)
can end it or reach the banner; it is a document of its own, so its style sheets cannot
restyle, hide or cover the banner either (a banner injected into the page, even in a shadow
root, can be hidden through its host element or covered by the page's fixed elements). A
`<base href=... target=_top>` put first in its head (after the doctype, keeping its
rendering mode) makes its relative links, style sheets and images resolve to the original
site (to the page's own base, resolved, if it has one: the first base element wins, so
the page's cannot replace it), and its links open at the top, leaving the cached copy.

Nothing of the page runs. The iframe's sandbox has no `allow-scripts`, `allow-same-origin`
or `allow-forms`: no script, an opaque origin, no forms, no downloads, no plugins; a link
may open a new window (`target=_blank`) outside the sandbox, or navigate the top on a
click. The response's Content-Security-Policy (CACHE_POLICY) is the same sandbox (so the
page stays in it even if opened outside its frame), and `about:srcdoc` documents inherit
it: no script source, no frames (a meta refresh or a click inside the frame navigating it
is blocked: frame-src is 'none'), no forms, no connections; style sheets, images and fonts
from anywhere (`http:` and `https:`, as the live page has them; the referrer is never
sent), inline styles. The price of the frame's opaque origin: web fonts, fetched with CORS,
load only from sites that allow any origin (`Access-Control-Allow-Origin: *`); the text
shows in a fallback font elsewhere. The text view, the plain text and the error pages take a stricter
policy (TEXT_POLICY: no request at all but inline styles).

Without a copy the answer is a 404 (503: no index, or too busy), as an HTML page for a
client that asks for HTML, else as the API's JSON error.
"""

import re
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode, urljoin

import jinja2
import orjson
from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from selectolax.lexbor import LexborHTMLParser

from filbert.parse import content_kind, decode_html, decode_text
from filbert.web.broker import Broker, Reply

TEMPLATES = Path(__file__).parent / "templates"
RETRY_AFTER = "1"  # seconds a client told 503 should wait before it asks again
# The page view's policy, which its srcdoc frame inherits (see the module's docstring).
SANDBOX = "allow-popups allow-popups-to-escape-sandbox allow-top-navigation-by-user-activation"
CACHE_POLICY = (
    f"sandbox {SANDBOX}; default-src 'none'; style-src 'unsafe-inline' http: https:; "
    "img-src http: https: data:; font-src http: https: data:; base-uri http: https:; "
    "form-action 'none'; frame-ancestors 'none'"
)
# The text view's, the plain text's and the error pages': inline styles only.
TEXT_POLICY = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
# A media type and its parameters as RFC 9110 allows them: anything else from a crawled
# server (control characters, stray quotes) is not used.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
PARAMETER = rf"[ \t]*;[ \t]*{TOKEN}=(?:{TOKEN}|\"[ !#-\[\]-~]*\")"
MEDIA_TYPE = re.compile(rf"({TOKEN}/{TOKEN})((?:{PARAMETER})*)")
# What may come before a page's <html>: a byte-order mark, white space, comments, an XML
# declaration, and its doctype, after which the base element goes (before it, the page
# would render in quirks mode).
PROLOG = re.compile(r"\A\ufeff?(?:\s+|<!--.*?-->|<\?[^>]*>)*(?:<!doctype[^>]*>)?", re.I | re.S)
DOCUMENTS = {  # what a document shown as text is, by what the parser read it as
    "pdf": "PDF document",
    "feed": "feed",
    "docx": "Word document",
    "odt": "OpenDocument text",
}
ERROR = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"error": {"type": "string"}},
            "required": ["error"],
        }
    },
    "text/html": {},
}
CACHE_RESPONSES: dict[int | str, dict] = {
    200: {
        "description": "the cached copy, an HTML page: a banner over the page as fetched "
        "(in a sandbox), or its text",
        "content": {"text/html": {}},
    },
    404: {"description": "the URL is not in the index", "content": ERROR},
    "4XX": {"description": "400: a parameter is not understood", "content": ERROR},
    503: {
        "description": "no index yet, a damaged file, or too busy: see Retry-After",
        "content": ERROR,
    },
}


def safe_media_type(value: str) -> str:
    """A crawled page's Content-Type as it may be used: its type and the well-formed
    parameters before anything that is not, or application/octet-stream."""
    match = MEDIA_TYPE.match(value.strip())
    return match.group(1) + match.group(2) if match else "application/octet-stream"


def page_text(url: str, content: bytes, content_type: str, html: bool = True) -> str:
    """A cached page's text in its stored encoding, as the parser read it (the header's
    charset, a byte-order mark, a <meta>; else detected)."""
    decode = decode_html if html else decode_text
    return decode(content, safe_media_type(content_type), url)[0]


def page_base(url: str, page: str) -> str:
    """The URL the page's relative links resolve against: its own first base element's,
    resolved against its URL (if that is a web URL), else its URL."""
    base = LexborHTMLParser(page).css_first("base[href]")
    href = (base.attributes.get("href") or "").strip() if base is not None else ""
    resolved = urljoin(url, href) if href else url
    return resolved if is_web_url(resolved) else url


def framed(url: str, page: str) -> str:
    """The page as its frame shows it: a base element first in its head (see the module's
    docstring)."""
    base = f'<base href="{escape(page_base(url, page))}" target="_top">'
    at = PROLOG.match(page)
    end = at.end() if at else 0
    return page[:end] + base + page[end:]


def blocks(text: str) -> list[str]:
    """A text view's paragraphs: its lines (a block each)."""
    return [line for line in text.split("\n") if line.strip()]


def is_web_url(url: str) -> bool:
    """Only http(s) URLs become links (never javascript: or data:)."""
    return url.startswith(("http://", "https://"))


def fetched_on(value: str | None) -> tuple[str, str] | None:
    """When a copy was fetched, as shown ("5 March 2026, 14:03 UTC") and as ISO 8601."""
    if not value:
        return None
    when = datetime.fromisoformat(value)
    return f"{when.day} {when:%B %Y, %H:%M} UTC", when.isoformat()


def wants_html(request: Request) -> bool:
    """Whether the client asks for HTML (a browser) rather than JSON (an API client)."""
    return "text/html" in request.headers.get("accept", "")


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["web_url"] = is_web_url
    return env


def add_cache(app: FastAPI, broker: Broker) -> None:
    """GET /cache: filbert's cached copy of a page, or its text-only version."""
    template = make_environment().get_template("cached.html")

    def page(status: int, policy: str, **context: Any) -> HTMLResponse:
        headers = {"Content-Security-Policy": policy, "X-Robots-Tag": "noindex"}
        if status == 503:
            headers["Retry-After"] = RETRY_AFTER
        return HTMLResponse(template.render(context), status_code=status, headers=headers)

    @app.get("/cache", summary="A page's cached copy", responses=CACHE_RESPONSES)
    async def cache(
        request: Request,
        url: Annotated[str, Query(min_length=1, description="the page's URL, as indexed")],
        view: Annotated[
            Literal["page", "text"],
            Query(description="the page as fetched (page), or its text as parsed (text)"),
        ] = "page",
    ) -> Response:
        """The page as it was fetched under a banner saying when, in a sandbox (no script
        runs; its style sheets and images come from its site), or its text."""
        reply = await broker.cached(url, request.scope["deadline"], text=view == "text")
        context: dict[str, Any] = {
            "url": url,
            "page_link": "?" + urlencode({"url": url}),
            "text_link": "?" + urlencode({"url": url, "view": "text"}),
        }
        if reply.status != 200:
            if not wants_html(request):
                return JSONResponse(
                    {"error": reply.error},
                    status_code=reply.status,
                    headers={"Retry-After": RETRY_AFTER} if reply.status == 503 else None,
                )
            return page(reply.status, TEXT_POLICY, view="error", error=reply, **context)
        context["fetched"] = fetched_on(reply.head.get("fetched"))
        response = shown(url, reply, context)
        response.headers["X-Filbert-Segment"] = reply.head["segment"]
        return response

    def shown(url: str, reply: Reply, context: dict[str, Any]) -> HTMLResponse:
        content_type = reply.head["content_type"]
        if reply.head.get("view") == "text":
            found = orjson.loads(reply.body)
            kind = reply.head.get("kind")
            return page(
                200,
                TEXT_POLICY,
                view="text",
                title=found["title"],
                blocks=blocks(found["text"]),
                document=DOCUMENTS.get(kind or ""),
                **context,
            )
        if content_kind(safe_media_type(content_type), reply.body) == "text":
            plain = page_text(url, reply.body, content_type, html=False)
            return page(200, TEXT_POLICY, view="plain", plain=plain, **context)
        srcdoc = framed(url, page_text(url, reply.body, content_type))
        return page(200, CACHE_POLICY, view="page", srcdoc=srcdoc, sandbox=SANDBOX, **context)
