"""URLs (urls/): normalization (ada-url and the configurable normalizer), resolution
against a base, host fingerprints and buckets, the regex, domain and suffix filters with
their settings and reasons, and the traps they refuse (repeated segments, calendars)."""

import socket
from datetime import UTC, datetime

import pytest

from filbert.config import ConfigError, Settings
from filbert.urls import (
    InvalidUrl,
    UrlFilter,
    UrlNormalizer,
    bucket_of,
    display_host,
    domain_of,
    fingerprint,
    host_of,
    normalize_url,
    resolve_url,
    strip_port,
)
from filbert.urls.domain import _public_suffixes
from filbert.urls.filter import FilterLimits, RegexUrlFilter, UrlFilterError


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("HTTP://Example.COM:80/a/./b/../c", "http://example.com/a/c"),
        ("https://example.com:443", "https://example.com/"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("http://example.com/page#section", "http://example.com/page"),
        ("http://example.com/%7euser/%2f", "http://example.com/~user/%2F"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/?q=%7e&x=1", "http://example.com/?q=~&x=1"),
        ("  http://example.com/trim  ", "http://example.com/trim"),
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ],
)
def test_normalize(raw, expected):
    assert normalize_url(raw) == expected


@pytest.mark.parametrize(
    "raw", ["not a url", "ftp://example.com/", "mailto:a@b.c", "http://", "javascript:alert(1)"]
)
def test_normalize_rejects(raw):
    with pytest.raises(InvalidUrl):
        normalize_url(raw)


def test_resolve_against_base():
    assert resolve_url("../c.html#x", "http://a.com/x/y/z.html") == "http://a.com/x/c.html"
    assert resolve_url("//b.com/p", "https://a.com/") == "https://b.com/p"
    with pytest.raises(InvalidUrl):
        resolve_url("mailto:x@y.z", "http://a.com/")


def test_host_fingerprint_bucket():
    assert host_of("http://a.com:8080/x/y") == "a.com:8080"
    assert host_of("http://a.com/") == "a.com"
    fp = fingerprint("http://a.com/")
    assert len(fp) == 16 and fp == fingerprint("http://a.com/") != fingerprint("http://a.com/x")
    assert bucket_of("a.com", 8) == bucket_of("a.com", 8)
    assert {bucket_of(f"h{i}.com", 8) for i in range(100)} == set(range(8))


def test_default_filter():
    f = UrlFilter.from_settings(Settings())
    assert f.accepts("http://a.com/page.html")
    assert f.accepts("https://a.com/search?q=1")
    assert not f.accepts("http://a.com/logo.PNG")
    assert not f.accepts("http://a.com/a/b/a/c/a/d/")  # repeated path segment trap
    assert not f.accepts("http://a.com/" + "x" * 3000)  # too long


def test_filter_file_first_match_wins(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("# comment\n-\\.private\\.\n+^http://a\\.com/\n")
    f = UrlFilter.from_settings(Settings({"urlfilter.regex.file": str(rules)}))
    assert f.accepts("http://a.com/x")
    assert not f.accepts("http://a.private.com/x")
    assert not f.accepts("http://b.com/")  # no rule matches: rejected


@pytest.mark.parametrize("text", ["*bad", "+(unclosed"])
def test_filter_file_errors(text):
    with pytest.raises(UrlFilterError, match="<rules>:1"):
        RegexUrlFilter.parse(text)


# --- normalizers --------------------------------------------------------------


def _normalizer(**overrides) -> UrlNormalizer:
    return UrlNormalizer.from_settings(
        Settings({k.replace("_", "."): v for k, v in overrides.items()})
    )


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a.com/x", "http://a.com/x"),
        ("http://a.com/p;jsessionid=0A1B?id=2", "http://a.com/p?id=2"),
        ("http://a.com/p.jsp;JSESSIONID=0A1B;type=a/q", "http://a.com/p.jsp;type=a/q"),
        ("http://a.com/;jsessionid=9", "http://a.com/"),
        ("http://a.com/?PHPSESSID=1&q=x&sid=2", "http://a.com/?q=x"),
        ("http://a.com/?ASPSESSIONIDQQGGQGPG=abc", "http://a.com/"),
        ("http://a.com/?utm_source=n&UTM_Medium=m&utm_campaign=c", "http://a.com/"),
        (
            "http://a.com/?b=2&gclid=1&fbclid=2&msclkid=3&mc_eid=4&yclid=5&_ga=6&a=1",
            "http://a.com/?b=2&a=1",
        ),
        ("http://a.com/?a=1&&b=2&", "http://a.com/?a=1&b=2"),
        ("http://a.com/?&", "http://a.com/"),
        (
            "http://a.com/?utm=1&sidebar=2&xsid=3",
            "http://a.com/?utm=1&sidebar=2&xsid=3",
        ),  # whole names only
        (
            "http://a.com/p?q=1;jsessionid=2",
            "http://a.com/p?q=1;jsessionid=2",
        ),  # ';' in a query value
        ("http://a;jsessionid=1.com/x", "http://a;jsessionid=1.com/x"),  # ';' in a host
        ("https://www.a.com/?b=1&a=2", "https://www.a.com/?b=1&a=2"),  # no sorting, www kept
    ],
)
def test_normalizer_defaults(url, expected):
    normalizer = _normalizer()
    assert normalizer.normalize(url) == expected
    assert normalizer.normalize(expected) == expected


def test_normalizer_output_of_normalize_url():
    url = normalize_url("HTTP://Example.com/a;JSESSIONID=x?utm_source=feed&q=%7e#top")
    assert _normalizer().normalize(url) == "http://example.com/a?q=~"


def test_normalizer_sort_query_is_stable_by_name():
    normalizer = _normalizer(urlnormalizer_sort_query=True)
    assert normalizer.normalize("http://a.com/?c=1&a=2&b=3&a=1") == "http://a.com/?a=2&a=1&b=3&c=1"
    assert normalizer.normalize("http://a.com/?b&a=&utm_id=1") == "http://a.com/?a=&b"


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://www.a.com/x", "https://a.com/x"),
        ("http://www.a.co.uk:8080/", "http://a.co.uk:8080/"),
        ("http://www.com/", "http://www.com/"),
        ("http://wwwa.com/", "http://wwwa.com/"),
        ("http://a.www.com/", "http://a.www.com/"),
    ],
)
def test_normalizer_strip_www(url, expected):
    assert _normalizer(urlnormalizer_strip_www=True).normalize(url) == expected


def test_normalizer_custom_params():
    normalizer = _normalizer(urlnormalizer_strip_params=" ref , trk* ")
    assert (
        normalizer.normalize("http://a.com/;trk_x=1?ref=x&trkid=2&utm_source=y")
        == "http://a.com/?utm_source=y"
    )
    assert (
        _normalizer(urlnormalizer_strip_params="").normalize("http://a.com/?sid=1")
        == "http://a.com/?sid=1"
    )


# --- hosts and domains --------------------------------------------------------


@pytest.mark.parametrize(
    "host, domain",
    [
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("a.b.bbc.co.uk:8080", "bbc.co.uk"),
        ("co.uk", "co.uk"),
        ("github.io", "github.io"),
        ("someone.github.io", "someone.github.io"),
        ("docs.someone.github.io", "someone.github.io"),
        ("example.com.", "example.com"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("[::1]:8080", "[::1]"),
        ("[2001:db8::1]", "[2001:db8::1]"),
        ("localhost:8080", "localhost"),
        ("host.internal", "host.internal"),
        ("shop.xn--80aswg.xn--p1ai", "xn--80aswg.xn--p1ai"),  # shop.сайт.рф
        ("www.xn--bcher-kva.de", "xn--bcher-kva.de"),  # www.bücher.de
    ],
)
def test_domain_of(host, domain):
    assert domain_of(host) == domain


def test_domain_of_stays_offline(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the Public Suffix List must not be fetched")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    _public_suffixes.cache_clear()
    domain_of.cache_clear()
    assert domain_of("news.bbc.co.uk") == "bbc.co.uk"


@pytest.mark.parametrize(
    "host, shown",
    [
        ("xn--bcher-kva.example", "bücher.example"),
        ("www.xn--bcher-kva.de:8080", "www.bücher.de:8080"),
        ("example.com", "example.com"),
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("xn--zz.example", "xn--zz.example"),  # not valid punycode: left alone
    ],
)
def test_display_host(host, shown):
    assert display_host(host) == shown


def test_strip_port():
    assert [strip_port(h) for h in ("a.com:81", "a.com", "[::1]:81", "[::1]")] == [
        "a.com",
        "a.com",
        "[::1]",
        "[::1]",
    ]


# --- filters ------------------------------------------------------------------


def _filter(**overrides) -> UrlFilter:
    """The fast checks from settings in front of one rule that accepts every http(s) URL."""
    settings = Settings({k.replace("_", "."): v for k, v in overrides.items()})
    rules = RegexUrlFilter.parse("+^https?://", limits=FilterLimits.from_settings(settings))
    return UrlFilter([("urlfilter-regex", rules)])


def test_why_rejected_explains_each_check():
    f = UrlFilter.from_settings(Settings())
    assert f.why_rejected("http://a.com/page.html") is None
    assert "urlfilter.suffix.deny" in f.why_rejected("http://a.com/logo.PNG")
    assert "crawler trap" in f.why_rejected("http://a.com/a/b/a/c/a/d/")
    assert "longer than 2048" in f.why_rejected("http://a.com/" + "x" * 3000)
    assert (
        f.why_rejected("ftp://a.com/") == "matches rule -^(?:file|ftp|mailto|javascript|data|tel): "
        "(regex-urlfilter.txt:6)"
    )
    assert (
        RegexUrlFilter.parse("+^https://").why_rejected("http://a.com/") == "matches no accept rule"
    )


def test_filter_from_plain_dict_settings():
    f = UrlFilter.from_settings(dict(Settings({"urlfilter.domain.deny": "b.com"})))
    assert f.accepts("http://a.com/") and not f.accepts("http://x.b.com/")


def test_domain_allow():
    f = _filter(urlfilter_domain_allow="example.com, *.bücher.de, 127.0.0.1, a.org:8080")
    for url in (
        "http://example.com/",
        "https://docs.example.com/x",
        "http://www.xn--bcher-kva.de/",
        "http://127.0.0.1:8080/",
        "http://a.org:8080/",
    ):
        assert f.accepts(url), url
    for url in (
        "http://notexample.com/",
        "http://example.com.evil.net/",
        "http://127.0.0.2/",
        "http://a.org/",
        "http://sub.a.org:8080/",
        "http://com/",
    ):
        assert f.why_rejected(url) == f"host {host_of(url)} is not in urlfilter.domain.allow", url


def test_domain_deny_wins_over_allow():
    f = _filter(urlfilter_domain_allow="example.com", urlfilter_domain_deny="ads.example.com,[::1]")
    assert f.accepts("http://www.example.com/")
    assert (
        f.why_rejected("http://x.ads.example.com/")
        == "host x.ads.example.com is denied by urlfilter.domain.deny (ads.example.com)"
    )
    assert not _filter(urlfilter_domain_deny="[::1]").accepts("http://[::1]:8080/")
    assert _filter(urlfilter_domain_deny="1.0.0.1").accepts("http://10.0.0.1/")  # IPs: exact only


@pytest.mark.parametrize("entry", ["http://a.com/", "a.com/x", "user@a.com", "a b.com"])
def test_domain_setting_errors(entry):
    with pytest.raises(ConfigError, match=r"urlfilter\.domain\.allow: .* is not a domain or host"):
        _filter(urlfilter_domain_allow=entry)


def test_suffix_deny_looks_at_the_path_only():
    f = _filter(urlfilter_suffix_deny=".PDF, .tar.gz")
    assert (
        f.why_rejected("http://a.com/doc.Pdf?x=1")
        == "path ends in .pdf (urlfilter.suffix.deny, parser.types)"
    )
    assert not f.accepts("http://a.com/x.tar.gz")
    assert f.accepts("http://a.com/get?file=doc.pdf")
    assert f.accepts("http://a.com/pdf")
    assert _filter(urlfilter_suffix_deny="").accepts("http://a.com/a.png")


def test_max_path_depth_and_query_params():
    f = _filter(urlfilter_max_path_depth=3, urlfilter_max_query_params=2)
    assert f.accepts("http://a.com/a/b/c?x=1&y=2")
    assert "urlfilter.max.path.depth" in f.why_rejected("http://a.com/a/b/c/")
    assert (
        f.why_rejected("http://a.com/?x=1&y=2&z=3")
        == "3 query parameters, more than 2 (urlfilter.max.query.params)"
    )
    assert f.accepts("http://a.com/?x=1&&y=2&")  # empty ones do not count
    deep = "http://a.com" + "".join(f"/{i}" for i in range(50))
    assert _filter().accepts(deep[: deep.index("/16")])  # 16 segments
    assert not _filter().accepts(deep[: deep.index("/17")])
    assert _filter(urlfilter_max_path_depth=-1, urlfilter_max_query_params=-1).accepts(
        deep + "?" + "&".join(f"p{i}=1" for i in range(50))
    )


@pytest.mark.parametrize(
    "url, repeats, rejected",
    [
        ("http://a.com/a/b/a/c/a/d/", 3, True),
        ("http://a.com/a/a/a", 3, True),
        ("http://a.com/x/a/b/c/a/b/c/a/", 3, True),
        ("http://a.com/a/b/a/c/", 3, False),
        ("http://a.com/a//a/", 3, False),
        ("http://a.com/a/b/a/", 2, True),
        ("http://a.com/a/a/a/a/a/", 0, False),
    ],
)
def test_repeated_segments(url, repeats, rejected):
    reason = _filter(urlfilter_trap_max_repeats=repeats).why_rejected(url)
    assert (reason == f"path segment 'a' occurs {repeats}+ times (crawler trap)") is rejected, (
        reason
    )


THIS_YEAR = datetime.now(UTC).year


@pytest.mark.parametrize(
    "url, year",
    [
        (f"http://a.com/events/{THIS_YEAR + 5}/05/", THIS_YEAR + 5),
        (f"http://a.com/calendar/{THIS_YEAR + 5}-05-01", THIS_YEAR + 5),
        (f"http://a.com/cal?date={THIS_YEAR + 5}-05-01", THIS_YEAR + 5),
        (f"http://a.com/cal?date={THIS_YEAR + 5}0501", THIS_YEAR + 5),
        (f"http://a.com/cal?month=5&eventYear={THIS_YEAR + 5}", THIS_YEAR + 5),
        (f"http://a.com/cal?d={THIS_YEAR + 5}%2F05", THIS_YEAR + 5),
        ("http://a.com/cal?year=1850", 1850),
        ("http://a.com/cal?y=1850&m=1", 1850),
        ("http://a.com/1850/12/", 1850),
        (f"http://a.com/from/2001-01/to/{THIS_YEAR + 5}-01", THIS_YEAR + 5),
    ],
)
def test_calendar_trap(url, year):
    reason = _filter().why_rejected(url)
    bound = "before 1900" if year < 1900 else f"after {THIS_YEAR + 2}"
    assert reason == f"dated {year}, {bound} (calendar trap)"


@pytest.mark.parametrize(
    "url",
    [
        f"http://a.com/blog/{THIS_YEAR}/05/post",
        f"http://a.com/events/{THIS_YEAR + 2}/12/",
        "http://a.com/archive/1999/05/",
        "http://a.com/wiki/1850",  # a year alone is no date
        "http://a.com/item/1234",
        "http://a.com/item/1234/56",
        "http://a.com/?updated=1700000000",  # a timestamp is no year
        "http://a.com/?page=1850",  # not a year parameter
        "http://a.com/v/18501/05",
    ],
)
def test_calendar_trap_spares(url):
    assert _filter().accepts(url)


def test_calendar_trap_bounds_are_settings():
    url = f"http://a.com/events/{THIS_YEAR + 5}/05/?year=1850"
    assert _filter(urlfilter_trap_year_min=0, urlfilter_trap_years_ahead=-1).accepts(url)
    assert _filter(urlfilter_trap_year_min=0, urlfilter_trap_years_ahead=5).accepts(url)
    assert "after" in _filter(urlfilter_trap_year_min=0, urlfilter_trap_years_ahead=4).why_rejected(
        url
    )
