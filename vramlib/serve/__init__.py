"""Layer 5, serving: vLLM-style KV capacity, roofline throughput, cost per token, fit maps.
"""
