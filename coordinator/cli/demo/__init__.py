"""The demo: a sample project and a scripted session over it."""
