"""128-bit URL fingerprints (the "information fingerprints" of Chinese search-engine texts) and host buckets."""

import xxhash


def fingerprint(url: str) -> bytes:
    """A 16-byte fingerprint of a normalized URL: collisions are practically impossible."""
    return xxhash.xxh3_128_digest(url.encode("utf-8"))


def bucket_of(host: str, buckets: int) -> int:
    """The table bucket a host's URLs live in; stable across runs and machines."""
    return xxhash.xxh3_64_intdigest(host.encode("utf-8")) % buckets
