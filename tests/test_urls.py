import pytest

from filbert.config import Settings
from filbert.urls import (
    InvalidUrl,
    UrlFilter,
    bucket_of,
    fingerprint,
    host_of,
    normalize_url,
    resolve_url,
)
from filbert.urls.filter import UrlFilterError


@pytest.mark.parametrize("raw, expected", [
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
])
def test_normalize(raw, expected):
    assert normalize_url(raw) == expected


@pytest.mark.parametrize("raw", ["not a url", "ftp://example.com/", "mailto:a@b.c", "http://", "javascript:alert(1)"])
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
    assert not f.accepts("http://a.com/a/b/a/c/a/d/")      # repeated path segment trap
    assert not f.accepts("http://a.com/" + "x" * 3000)     # too long


def test_filter_file_first_match_wins(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("# comment\n-\\.private\\.\n+^http://a\\.com/\n")
    f = UrlFilter.from_settings(Settings({"urlfilter.regex.file": str(rules)}))
    assert f.accepts("http://a.com/x")
    assert not f.accepts("http://a.private.com/x")
    assert not f.accepts("http://b.com/")                  # no rule matches: rejected


@pytest.mark.parametrize("text", ["*bad", "+(unclosed"])
def test_filter_file_errors(text):
    with pytest.raises(UrlFilterError, match="<rules>:1"):
        UrlFilter.parse(text)
