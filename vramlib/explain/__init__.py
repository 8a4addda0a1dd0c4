"""Layer 6, explanations: the source's own arithmetic (audit), design levers, bookshelf diagrams,
validation against measurements.
"""
