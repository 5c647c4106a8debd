"""The domains stage: speciation, the API context tree extracted from documents (ToolACE §2.1).

Documents are the descriptions and introductions of the run's source tools and the files named
in ``tools.synthesis.documents``; a seeded sample of them is read. The designer model names the
application domains the documents belong to, then each domain is expanded into subdomains and
each subdomain into fine-grained functionalities. A node already in the pool's tree is expanded
again with its known children listed, so the model adds new ones: the tree grows run after run.
The stage has one shard (one tree); it is off when synthesis is.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, ClassVar

from toolfactory.models import DomainNode
from toolfactory.stages.base import Planning, ShardContext, ShardSpec, StageOutput
from toolfactory.stages.domains.tree import DEPTH, ContextTree
from toolfactory.stages.tools.importers import MalformedTool, convert
from toolfactory.stages.tools.sources import SourceItem

DOMAINS_PROMPT = """\
Below are descriptions of APIs and documents about what people do with software. Name {count}
broad application domains that APIs serving these needs belong to (for example Finance,
Healthcare, Transportation). Prefer domains that are clearly distinct from each other and from
the known domains.
Known domains: {known}
Documents:
{documents}"""

EXPAND_PROMPT = """\
In a tree of API application areas, the node "{path}" needs {count} more specific children: {what}.
Each child must be distinct from the others and from the known children, and concrete enough
that an API could serve it.
Known children: {known}"""

WHAT = {1: "subdomains of this domain", 2: "fine-grained functionalities an API in this subdomain could offer"}


def _nodes_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "nodes": {
                "type": "array",
                "minItems": 1,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 2, "maxLength": 60},
                        "description": {"type": "string", "minLength": 5},
                    },
                    "required": ["name", "description"],
                },
            }
        },
        "required": ["nodes"],
    }


class DomainsStage:
    name: ClassVar[str] = "domains"

    def plan(self, planning: Planning) -> list[ShardSpec]:
        if planning.config.tools.synthesis.count == 0:
            return []
        inputs = planning.outputs("sources") + planning.outputs("documents")
        return [ShardSpec(self.name, 0, inputs, {"pool_tree": list(planning.pool_tree)})]

    async def run(self, shard: ShardSpec, inputs: list[dict[str, Any]], ctx: ShardContext) -> StageOutput:
        settings = ctx.config.tools.synthesis
        known = ContextTree(DomainNode.model_validate(r) for path in shard.params.get("pool_tree", []) for r in ctx.read(path))
        documents = [text for record in inputs if (text := document_text(record))]
        random.Random(f"{ctx.config.run.seed}:speciation").shuffle(documents)
        documents = documents[: settings.speciation_documents]
        out = StageOutput(items_in=len(documents))
        tree = ContextTree(known.nodes())

        async def ask(prompt: str, count: int, name: str) -> list[dict[str, str]]:
            answer = await ctx.gateway.structured(
                "designer", [{"role": "user", "content": prompt}], _nodes_schema(count), name=name
            )
            return answer["nodes"]

        def grow(parent: list[str], answers: list[dict[str, str]]) -> list[list[str]]:
            """Add the named children of `parent`; the paths named (new or already known)."""
            named = []
            for item in answers:
                node = DomainNode(path=[*parent, " ".join(item["name"].split())], description=item["description"])
                if tree.add(node):
                    out.records.append(node)
                    out.count("new_nodes_by_depth", str(len(node.path)))
                named.append(tree.get(node.path).path)
            return named

        batches = [documents[i : i + settings.documents_per_prompt] for i in range(0, len(documents), settings.documents_per_prompt)]
        known_domains = ", ".join(n.path[0] for n in known.at_depth(1)) or "none"
        frontier: list[list[str]] = []
        for answers in await asyncio.gather(*(
            ask(DOMAINS_PROMPT.format(count=settings.domains_per_prompt, known=known_domains,
                                      documents="\n".join(f"- {d}" for d in batch)), settings.domains_per_prompt, "domains")
            for batch in batches
        )):
            frontier += grow([], answers)
        # Expand level by level every node named tonight, new or known: a known node is shown
        # with its known children and gains new ones.
        for depth in range(1, DEPTH):
            frontier = list({tuple(p): p for p in frontier}.values())
            results = await asyncio.gather(*(
                ask(EXPAND_PROMPT.format(path=" > ".join(path), count=settings.children_per_node, what=WHAT[depth],
                                         known=", ".join(c.path[-1] for c in tree.children(path)) or "none"),
                    settings.children_per_node, f"expand_depth_{depth}")
                for path in frontier
            ))
            frontier = [named for path, answers in zip(frontier, results) for named in grow(path, answers)]
        for node in tree.nodes():
            out.count("tree_nodes_by_depth", str(len(node.path)))
        return out


def document_text(record: dict[str, Any]) -> str:
    """The text a source item or document contributes to speciation ('' when it has none)."""
    if "text" in record:  # a document
        return str(record["text"]).strip()
    item = SourceItem.model_validate(record)
    if item.format == "introductions":
        raw = item.raw if isinstance(item.raw, dict) else {}
        name = raw.get("name") or raw.get("API") or ""
        intro = raw.get("introduction") or raw.get("Description") or ""
        return f"{name}: {intro}".strip(": ")
    try:
        tools = convert(item.format, item.raw)
    except MalformedTool:
        return ""
    return " ".join(f"{t.name}: {t.description or t.introduction}".strip(": ") for t in tools)
