"""Layer 7, presentation: plots and SVG bars (viz), ipywidgets panels (widgets), the JSON their static views carry
(jsdata).
"""
