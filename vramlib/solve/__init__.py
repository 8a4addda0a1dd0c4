"""Layer 4, solvers: inverse questions (longest context, largest batch or model, fewest GPUs), the
pipeline balancer and plan search, training-feasibility, the GPU recommender, rules of thumb.
"""
