"""Deliberately broken plugins used by tprimat's tests."""
