"""The search web front end: an HTML search page, a JSON API and a health check."""

from filbert.web.app import create_app, run_server

__all__ = ["create_app", "run_server"]
