"""Accuracy against measured ground truth: readers for its formats, the harness, the report."""
