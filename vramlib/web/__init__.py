"""Layer 8, the static book: JavaScript generated from the expressions (jsgen), the Sphinx extension that
writes it at build time, and the calculators' orchestration in js/.
"""
