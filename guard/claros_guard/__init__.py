"""Claros client side: the MCP guard, Claude Code hooks and `claros verify`."""
