"""Traffic: requests, arrival processes, length distributions, prefix sharing, traces."""
