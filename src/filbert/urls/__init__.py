"""URLs: WHATWG parsing and normalization, regex filtering, fingerprints and buckets."""

from filbert.urls.filter import UrlFilter
from filbert.urls.fingerprint import bucket_of, fingerprint
from filbert.urls.normalize import InvalidUrl, host_of, normalize_url, resolve_url

__all__ = [
    "InvalidUrl",
    "UrlFilter",
    "bucket_of",
    "fingerprint",
    "host_of",
    "normalize_url",
    "resolve_url",
]
