"""Mappings: which facts a tool's call needs, and how the guard reads them from the app."""
