"""Layer 2, memory of one device: the Breakdown result, inference (weights, KV cache, workspace, the
tensor-parallel KV rule), activations saved for backward, training (conventions, optimizers, LoRA).
Imports core and catalog.
"""
