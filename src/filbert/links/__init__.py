"""Link analysis offline: the linkdb of inlinks and anchor text (invertlinks), PageRank."""
