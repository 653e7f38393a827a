"""Inspection commands: readdb, readseg, warc export, parsechecker and eval."""
