"""URLs: WHATWG normalization, normalizers, filters, domains, fingerprints and buckets."""

from filbert.urls.domain import display_host, domain_of, strip_port
from filbert.urls.filter import UrlFilter
from filbert.urls.fingerprint import bucket_of, fingerprint
from filbert.urls.normalize import InvalidUrl, host_of, normalize_url, resolve_url
from filbert.urls.normalizer import UrlNormalizer

__all__ = [
    "InvalidUrl",
    "UrlFilter",
    "UrlNormalizer",
    "bucket_of",
    "display_host",
    "domain_of",
    "fingerprint",
    "host_of",
    "normalize_url",
    "resolve_url",
    "strip_port",
]
