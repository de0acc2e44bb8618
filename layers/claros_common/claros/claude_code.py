"""Claude Code's own tools that change things, by name: the hooks check them as writes of
``claude-code`` (claros_guard.hook_gate), and rule warnings know that no guard registers
their input (claros.rules.warnings). One list for both, so a tool added to one is in the
other. Nothing is imported here: the hooks start a process on every tool call."""

__all__ = ["EDIT_TOOLS", "SHELL_TOOLS", "WRITE_TOOLS"]

# The tools that run a shell command (``PowerShell``: Windows, opt-in elsewhere;
# ``Monitor``: a command in the background, its output fed back), in the order a warning
# names them.
SHELL_TOOLS = ("Bash", "PowerShell", "Monitor")
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
WRITE_TOOLS = frozenset({*SHELL_TOOLS, *EDIT_TOOLS})
