"""Calibration: measured kernel tables in, fitted per-operator cost curves out (calibration/fits/)."""
