"""The LLM gateway and what it needs: endpoint, cache, usage accounting."""

from toolfactory.llm.cache import RequestCache
from toolfactory.llm.endpoint import Endpoint, resolve_endpoint
from toolfactory.llm.gateway import LLMGateway
from toolfactory.llm.usage import UsageMeter

__all__ = ["Endpoint", "LLMGateway", "RequestCache", "UsageMeter", "resolve_endpoint"]
