"""Layer 1, catalog: what the reader picks by name -- GPUs (hardware), storage formats (precision), models and
config.json reading (models). Imports only core.
"""
