"""Link analysis: the linkdb (inlinks and anchor text), PageRank, and HITS at query time."""
