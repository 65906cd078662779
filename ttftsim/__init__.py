"""ttftsim: predict the time-to-first-token distribution of an LLM serving deployment before it exists."""

from ttftsim._native import use_sources_if_stale

__version__ = "0.1.0"

use_sources_if_stale()
