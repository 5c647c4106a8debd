"""The domains stage: speciation, the API context tree extracted from documents (ToolACE §2.1).

Documents are the descriptions and introductions of the run's source tools and the files named
in ``tools.synthesis.documents``; a seeded sample of them is read. The tree has the paper's four
levels: domain (Entertainment) → coarse subdomain (Music) → fine-grained domain (Music
streaming) → functionality (play a song). As in the paper, the designer model first reads the
documents: for each one it names the domain, subdomain and fine-grained domain the document
belongs to and every API functionality or use case the document describes, so whole paths come
from the documents (``origin: document``). Then the children of every node named tonight are
generated recursively, level by level (``origin: model``). A node already in the pool's tree is
expanded again with its known children listed, so the model adds new ones: the tree grows run
after run. The stage has one shard (one tree); it is off when synthesis is.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, ClassVar

from toolfactory.models import DomainNode
from toolfactory.stages.base import SOURCES, Inputs, Planning, ShardContext, ShardSpec, StageOutput
from toolfactory.stages.domains.tree import DEPTH, ContextTree
from toolfactory.definitions.convert import MalformedTool, convert
from toolfactory.stages.tools.sources import SourceItem

EXTRACT_PROMPT = """\
Below are numbered documents: descriptions of APIs and texts about what people do with software.
For each document, name the broad application domain it belongs to (for example Entertainment,
Finance, Healthcare), the coarse subdomain within it (for example Music), the fine-grained
domain within that (for example Music streaming), and every API functionality or use case the
document describes (for example "play a song by title").{known}
Documents:
{documents}"""

EXPAND_PROMPT = """\
In a tree of API application areas, the node "{path}" needs {count} more specific children: {what}.
Each child must be distinct from the others and from the known children, and concrete enough
that an API could serve it.{known}"""

WHAT = {
    1: "coarse subdomains of this domain",
    2: "fine-grained domains of this subdomain",
    3: "fine-grained functionalities an API in this domain could offer",
}
LEVELS = ("domain", "subdomain", "fine_domain")  # the levels above the functionalities


def _known(intro: str, names: list[str]) -> str:
    """The prompt's line of known names, or nothing: a placeholder such as "none" is a word a
    model may take for a name (the simulator made a domain "none MedInfoLookup Consumer" of it)."""
    return f"{intro}{', '.join(names)}" if names else ""


def _extract_schema(documents: int) -> dict[str, Any]:
    name = {"type": "string", "minLength": 2, "maxLength": 60}
    functionality = {"type": "object", "properties": {"name": name, "description": {"type": "string", "minLength": 5}},
                     "required": ["name", "description"]}
    return {
        "type": "object",
        "properties": {
            "documents": {
                "type": "array",
                "minItems": 1,
                "maxItems": documents,
                "items": {
                    "type": "object",
                    "properties": {
                        "document": {"type": "integer", "minimum": 1, "maximum": documents},
                        **{level: name for level in LEVELS},
                        "functionalities": {"type": "array", "minItems": 1, "maxItems": 8, "items": functionality},
                    },
                    "required": ["document", *LEVELS, "functionalities"],
                },
            }
        },
        "required": ["documents"],
    }


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
    inputs: ClassVar[Inputs] = Inputs(None, SOURCES)  # every `sources` and `documents` part

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

        def grow(parent: list[str], answers: list[dict[str, str]], origin: str = "model") -> list[list[str]]:
            """Add the named children of `parent`; the paths named (new or already known)."""
            named = []
            for item in answers:
                node = DomainNode(path=[*parent, " ".join(item["name"].split())], description=item["description"], origin=origin)
                if tree.add(node):
                    out.records.append(node)
                    out.count("new_nodes_by_depth", str(len(node.path)))
                    out.count("new_nodes_by_origin", origin)
                named.append(tree.get(node.path).path)
            return named

        def from_document(batch: list[str], item: dict[str, Any]) -> list[list[str]]:
            """The path a document names, its functionalities added under it; the paths named."""
            source = batch[min(max(int(item["document"]), 1), len(batch)) - 1]
            path: list[str] = []
            named = []
            for level in LEVELS:
                named += grow(path, [{"name": item[level], "description": f"From: {source[:160]}"}], "document")
                path = named[-1]
            grow(path, item["functionalities"], "document")
            return named

        batches = [documents[i : i + settings.documents_per_prompt] for i in range(0, len(documents), settings.documents_per_prompt)]
        known_domains = _known(" Reuse a known domain when one fits.\nKnown domains: ", [n.path[0] for n in known.at_depth(1)])
        named: list[list[str]] = []
        for batch, answer in zip(batches, await asyncio.gather(*(
            ctx.gateway.structured("designer", [{"role": "user", "content": EXTRACT_PROMPT.format(
                known=known_domains, documents="\n".join(f"{i}. {d}" for i, d in enumerate(batch, 1)))}],
                _extract_schema(len(batch)), name="document_domains")
            for batch in batches
        ))):
            for item in answer["documents"]:
                named += from_document(batch, item)
        # Expand level by level nodes named tonight, new or known: a known node is shown with
        # its known children (those the documents named too) and gains new ones. A seeded
        # sample of each level is expanded, so the cost stays bounded at four levels.
        pick = random.Random(f"{ctx.config.run.seed}:speciation:expand")
        frontier = [p for p in named if len(p) == 1]
        for depth in range(1, DEPTH):
            frontier = list({tuple(p): p for p in [*frontier, *(p for p in named if len(p) == depth)]}.values())
            frontier = pick.sample(frontier, min(len(frontier), settings.expand_per_level))
            results = await asyncio.gather(*(
                ask(EXPAND_PROMPT.format(path=" > ".join(path), count=settings.children_per_node, what=WHAT[depth],
                                         known=_known("\nKnown children: ", [c.path[-1] for c in tree.children(path)])),
                    settings.children_per_node, f"expand_depth_{depth}")
                for path in frontier
            ))
            frontier = [child for path, answers in zip(frontier, results) for child in grow(path, answers)]
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
