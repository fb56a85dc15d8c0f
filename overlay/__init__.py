"""overlay package."""
