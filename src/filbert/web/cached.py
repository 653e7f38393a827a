"""GET /cache: a page as it was fetched, in a sandbox."""

import re
from typing import Annotated

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from filbert.parse import decode_html, decode_text
from filbert.web.broker import Broker

RETRY_AFTER = "1"  # seconds a client told 503 should wait before it asks again
# A media type and its parameters as RFC 9110 allows them: anything else from a crawled
# server (control characters, stray quotes) is not sent on.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
PARAMETER = rf"[ \t]*;[ \t]*{TOKEN}=(?:{TOKEN}|\"[ !#-\[\]-~]*\")"
MEDIA_TYPE = re.compile(rf"({TOKEN}/{TOKEN})((?:{PARAMETER})*)")
ERROR = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"error": {"type": "string"}},
            "required": ["error"],
        }
    }
}
CACHE_RESPONSES: dict[int | str, dict] = {
    200: {"description": "the page as fetched, with its own media type", "content": {"*/*": {}}},
    404: {"description": "the URL is not in the index", "content": ERROR},
    "4XX": {"description": "400: a parameter is not understood", "content": ERROR},
    503: {
        "description": "no index yet, a damaged file, or too busy: see Retry-After",
        "content": ERROR,
    },
}


def safe_media_type(value: str) -> str:
    """A crawled page's Content-Type as it may be sent again: its type and the well-formed
    parameters before anything that is not, or application/octet-stream."""
    match = MEDIA_TYPE.match(value.strip())
    return match.group(1) + match.group(2) if match else "application/octet-stream"


def cached_copy(url: str, content: bytes, content_type: str) -> tuple[bytes, str]:
    """A cached page's body and Content-Type as sent. Text that does not name its charset
    in its type is sent as the UTF-8 of what the parser read: Starlette would label it
    UTF-8 anyway, garbling other encodings."""
    sent_type = safe_media_type(content_type)
    if sent_type.startswith("text/") and "charset=" not in sent_type.lower():
        decode = decode_html if sent_type.startswith("text/html") else decode_text
        return decode(content, sent_type, url)[0].encode(), f"{sent_type}; charset=utf-8"
    return content, sent_type


def error_json(status: int, message: str) -> JSONResponse:
    """The API's error; a 503 says when to come back."""
    return JSONResponse(
        {"error": message},
        status_code=status,
        headers={"Retry-After": RETRY_AFTER} if status == 503 else None,
    )


def add_cache(app: FastAPI, broker: Broker) -> None:
    """GET /cache: a page as it was fetched, in a sandbox."""

    @app.get("/cache", summary="A page as it was fetched", responses=CACHE_RESPONSES)
    async def cache(
        request: Request,
        url: Annotated[str, Query(min_length=1, description="the page's URL, as indexed")],
    ) -> Response:
        """The page's bytes as fetched, in a sandbox (no scripts, no requests to its site)."""
        reply = await broker.cached(url, request.scope["deadline"])
        if reply.status != 200:
            return error_json(reply.status, reply.error or "")
        body, content_type = cached_copy(url, reply.body, reply.head["content_type"])
        # the copy runs in a sandbox: no scripts, no requests to the page's site, its own origin
        return Response(
            body,
            media_type=content_type,
            headers={
                "Content-Security-Policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'",
                "X-Robots-Tag": "noindex",
                "X-Filbert-Segment": reply.head["segment"],
            },
        )
