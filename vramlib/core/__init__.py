"""Layer 0, core: errors and input checks, units (GB = 10^9, GiB = 2^30), sympy symbols, the memory
formulas as expressions with their exact evaluation, result tables and the colour palette. Imports nothing
from vramlib's other layers.
"""
