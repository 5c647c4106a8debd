"""Executable tool sources: tools whose calls really run.

An MCP server (over stdio or streamable HTTP) or a Python environment (a stateful class whose
public methods are the functions) is a *source* of tools, like a tool file; unlike a file, its
tools can be executed. The dialogues stage sends every call to such a tool to a fresh
:class:`~toolfactory.executable.session.Session` of its source (no LLM plays it), and the
verifier replays a dialogue's calls in another fresh session to check what they did.

* :mod:`.session`: the contract every source implements (:class:`Environment`, :class:`Session`,
  :class:`CallResult`, :class:`ExecutionFailed` and its reason codes);
* :mod:`.confine`: the launcher that runs every process the factory starts under limits on
  time, memory, output files, child processes and network, and leaves nothing behind.
* :mod:`.coercion`: near-miss argument types ("5" for an integer) made well typed before a call
  runs, under each source's ``near_miss_types``.
"""
