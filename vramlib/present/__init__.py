"""Layer 8, presentation for Jupyter: plots and SVG bars (viz), ipywidgets panels (widgets).
"""
