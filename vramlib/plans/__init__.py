"""Layer 3, parallel plans: per-GPU memory of a DP/ZeRO/TP/PP/EP plan and DeepSpeed's estimators.
Imports core, catalog and memory.
"""
