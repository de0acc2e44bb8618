"""Claros server side: ledger, rules, storage, API."""
