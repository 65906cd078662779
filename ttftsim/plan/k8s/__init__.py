"""The winner's deployable output: Kubernetes manifests that would run as written, the alternatives (vLLM
production-stack Helm values, a KServe InferenceService) and a README saying what to apply in which order.

spec.py gathers every decision in one frozen value (Deployable); pod.py, objects.py and alternatives.py
turn it into objects; readme.py explains them; write.py puts the files in the plan's result folder.
"""
