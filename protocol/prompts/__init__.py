"""Prompts the service sends the model, with their output schemas and parsers."""
