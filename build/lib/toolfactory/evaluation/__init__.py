"""Evaluation of solution paths: ToolEval pass and win rate (ToolLLM A.5)."""
