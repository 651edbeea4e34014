"""`prism`: failure attribution from a small model's prefill signals (MASPrism, arXiv 2605.07509)."""
