"""Pages behind gates, for SiteServer (sites.py): HTTP Basic and Digest (RFC 7616, MD5 with
qop=auth) authentication, and a login form with a session cookie and a logout link."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from sites import Answer, Page, Request, html, link

NONCE = "7a0f3e1c9b5d4e2f8a6c1b0d3e5f7a9c"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def basic(realm: str, user: str, password: str, page: Page | str) -> Answer:
    """The page to a request with these Basic credentials; else 401 naming the realm."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def answer(request: Request) -> Page:
        if request.headers.get("Authorization") == expected:
            return page if isinstance(page, Page) else Page(page)
        return Page("no", status=401, headers={"WWW-Authenticate": f'Basic realm="{realm}"'})

    return answer


def digest(realm: str, user: str, password: str, page: Page | str) -> Answer:
    """The page to a request with a right Digest response; else 401 with a challenge."""
    challenge = f'Digest realm="{realm}", qop="auth", nonce="{NONCE}", algorithm=MD5'

    def answer(request: Request) -> Page:
        header = request.headers.get("Authorization", "")
        if header.startswith("Digest ") and _digest_ok(header[7:], request, realm, user, password):
            return page if isinstance(page, Page) else Page(page)
        return Page("no", status=401, headers={"WWW-Authenticate": challenge})

    return answer


def _digest_ok(params: str, request: Request, realm: str, user: str, password: str) -> bool:
    pairs = re.findall(r'(\w+)=(?:"([^"]*)"|([^\s,]+))', params)
    found = {key: quoted or bare for key, quoted, bare in pairs}
    if (found.get("username"), found.get("realm"), found.get("uri")) != (user, realm, request.path):
        return False
    ha1, ha2 = _md5(f"{user}:{realm}:{password}"), _md5(f"{request.method}:{found['uri']}")
    expected = _md5(f"{ha1}:{NONCE}:{found.get('nc')}:{found.get('cnonce')}:auth:{ha2}")
    return found.get("response") == expected


@dataclass
class LoginSite:
    """A members' area: POST /session with user and password sets a session cookie and
    redirects to /members/; its pages want the cookie (else a redirect to /signin); GET
    /members/logout ends the session."""

    user: str
    password: str
    sessions: set[str] = field(default_factory=set)
    logins: int = 0

    def pages(self, members: int = 3) -> dict[str, Page | str | Answer]:
        links = " ".join(link(f"/members/{i}.html", f"page {i}") for i in range(members))
        home = html("Members", f"Welcome, member. {links} {link('/members/logout', 'Log out')}")
        found: dict[str, Page | str | Answer] = {
            "/signin": html("Sign in", "<form method=post action=/session></form>"),
            "/session": self._session,
            "/members/": self._member(home),
            "/members/logout": self._logout,
        }
        for i in range(members):
            found[f"/members/{i}.html"] = self._member(html(f"Page {i}", f"members page {i}"))
        return found

    def _session(self, request: Request) -> Page:
        self.logins += 1
        form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
        if request.method != "POST" or form != {"user": self.user, "password": self.password}:
            return Page(html("Sign in", "wrong user or password"), status=403)
        token = secrets.token_hex(16)
        self.sessions.add(token)
        cookie = f"session={token}; Path=/; HttpOnly"
        return Page("", status=303, headers={"Location": "/members/", "Set-Cookie": cookie})

    def _member(self, page: str) -> Answer:
        def answer(request: Request) -> Page:
            if _session_of(request) in self.sessions:
                return Page(page)
            return Page("", status=302, headers={"Location": "/signin"})

        return answer

    def _logout(self, request: Request) -> Page:
        self.sessions.discard(_session_of(request) or "")
        return Page("", status=302, headers={"Location": "/signin"})


def _session_of(request: Request) -> str | None:
    match = re.search(r"(?:^|;\s*)session=([0-9a-f]+)", request.headers.get("Cookie", ""))
    return match.group(1) if match else None
