"""The cluster around the engines: nodes and placement, pods and their cold starts, the HPA, routers,
prefill/decode disaggregation, faults and cost, run as SimPy processes."""
