"""ttftsim: predict the time-to-first-token distribution of an LLM serving deployment before it exists."""

__version__ = "0.1.0"
