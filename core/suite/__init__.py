"""Campaigns: suites of runs that survive kills, and result bundles."""
