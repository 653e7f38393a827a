"""PageRank speed: filbert's sparse power iteration on a 1M-page, 10M-link graph, and against
networkx (graph building + nx.pagerank) on a smaller graph in the same run.

Graphs are generated with a skewed in-degree (link targets drawn from a Zipf-like
distribution, as on the web) and uniform sources; pages that are never a source are
dangling. Both sides use damping 0.85 and the same L1 tolerance.

    .venv/bin/python bench/pagerank.py [--pages 1000000] [--links 10000000]
        [--small-pages 100000] [--small-links 1000000] [--no-record]
"""

from __future__ import annotations

import argparse
import resource
import time

import networkx as nx
import numpy as np
from harness import add_no_record, publish

from filbert.links.pagerank import power_iteration

TOL = 1e-6


def make_graph(pages: int, links: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, int(pages * 0.9), size=links)  # 10 % of pages link nowhere
    dst = (rng.zipf(1.6, size=links) - 1 + rng.integers(0, pages, size=links)) % pages
    keep = src != dst
    return src[keep], dst[keep]


def time_filbert(src: np.ndarray, dst: np.ndarray, pages: int) -> tuple[float, int]:
    start = time.perf_counter()
    result = power_iteration(src, dst, pages, tol=TOL)
    return time.perf_counter() - start, result.iterations


def time_networkx(src: np.ndarray, dst: np.ndarray, pages: int) -> tuple[float, float]:
    start = time.perf_counter()
    graph = nx.DiGraph()
    graph.add_nodes_from(range(pages))
    graph.add_edges_from(zip(src.tolist(), dst.tolist()))
    built = time.perf_counter()
    # networkx stops at an L1 change below n * tol, so divide to ask for the same accuracy
    nx.pagerank(graph, alpha=0.85, tol=TOL / pages, max_iter=1000)
    done = time.perf_counter()
    return done - start, built - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--links", type=int, default=10_000_000)
    parser.add_argument("--small-pages", type=int, default=100_000)
    parser.add_argument("--small-links", type=int, default=1_000_000)
    add_no_record(parser)
    args = parser.parse_args()

    src, dst = make_graph(args.small_pages, args.small_links)
    ours_small, iterations_small = time_filbert(src, dst, args.small_pages)
    theirs_small, building = time_networkx(src, dst, args.small_pages)
    src, dst = make_graph(args.pages, args.links)
    ours_big, iterations_big = time_filbert(src, dst, args.pages)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "| graph | filbert | networkx (build + pagerank) | ratio |",
        "|---|---:|---:|---:|",
        (
            f"| {args.small_pages:,} pages, {args.small_links:,} links | {ours_small:.2f} s "
            f"({iterations_small} iterations) | {theirs_small:.2f} s ({building:.2f} s building) | "
            f"{theirs_small / ours_small:.0f}× faster |"
        ),
        (
            f"| {args.pages:,} pages, {args.links:,} links | {ours_big:.2f} s "
            f"({iterations_big} iterations) | not run | |"
        ),
        "",
        f"Peak memory of the process: {peak_mb:,.0f} MB.",
    ]
    report = "\n".join(lines)
    publish(
        f"Tolerance {TOL} (L1), damping 0.85.\n\n{report}",
        "PageRank speed (bench/pagerank.py)",
        args,
    )


if __name__ == "__main__":
    main()
