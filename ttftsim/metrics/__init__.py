"""Per-request records, summaries, time series, exports (Parquet/CSV/JSON) and Prometheus exposition."""
