"""Schemas of every input file (pydantic, strict) and the loader that turns files into them."""
