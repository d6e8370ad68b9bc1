"""Comparison reports."""
