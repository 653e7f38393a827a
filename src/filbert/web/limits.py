"""The open-files limit, raised for a server's connections (the web server's and a
searcher's) as far as the system allows."""

from __future__ import annotations

import resource

FD_RESERVE = 256  # descriptors kept for the index, logs and worker pipes


def connection_limit(wanted: int) -> int:
    """Raises the open-files limit for `wanted` connections as far as the system allows;
    the number of connections it leaves room for."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return max(1, min(wanted, soft - FD_RESERVE))
