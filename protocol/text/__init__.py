"""Untrusted text made safe to show: control bytes made inert, passwords left out."""
