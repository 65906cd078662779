"""`ttftsim validate`: parse Kubernetes manifests and `vllm serve` arguments, check the deployment, predict
its TTFT."""
