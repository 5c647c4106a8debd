"""Tool definitions: the canonical :class:`~toolfactory.models.Function` from the formats tools
are published in (OpenAPI, OpenAI ``tools``, ToolBench, ToolAlpaca, BFCL function docs), and
what a definition must satisfy.

Below both the readers of released datasets (:mod:`toolfactory.formats`) and the stages
(:mod:`toolfactory.stages`), which use it alike; it imports neither.
"""
