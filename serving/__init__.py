"""What runs the engine on a GPU host: `localfa serve` launches `vllm serve` from a profile.

Shipped inside the package as `localfa.serving`; profiles are TOML files in `profiles/`.
"""
