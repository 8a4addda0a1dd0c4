"""Layer 9, workshop: the vramlib command line, feasibility reports, self-checking exercises.
"""
