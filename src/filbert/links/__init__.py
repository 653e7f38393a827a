"""Link analysis: the linkdb (inlinks and anchor text); PageRank and HITS come later."""
