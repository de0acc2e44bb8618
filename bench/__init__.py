"""Benchmarks: each prints figures and ratios against a baseline measured in the same run.

make bench                      # everything
.venv/bin/python -m bench append verify
"""
