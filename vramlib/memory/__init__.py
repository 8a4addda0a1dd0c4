"""Layer 2, memory of one device: the Breakdown result, inference (weights, KV cache, workspace, the
tensor-parallel KV rule), activations saved for backward, training (conventions, optimizers, LoRA, the Workload
settings), signatures (the keyword front doors of functions whose settings live in settings objects).
Imports core and catalog.
"""
