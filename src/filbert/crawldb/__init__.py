"""The crawldb and the steps that change it: inject, sitemap, generate, updatedb, dedup."""
