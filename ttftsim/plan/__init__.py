"""Capacity planning: search deployments for the cheapest that meets the SLOs."""
