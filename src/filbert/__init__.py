"""filbert: a web search engine that crawls like Nutch and ranks like early Google."""

__version__ = "0.1.0"
