"""localfa."""
