"""The API context tree (ToolACE §2.1): domain → coarse subdomain → fine-grained domain →
functionality (the paper's 30 domains, 390 subdomains, 3,398 fine-grained domains and their
functionalities).

Nodes are :class:`DomainNode` records identified by their path (compared without case), so
trees extracted in different runs merge by union: the tree of a run is the pool's tree (the
files of earlier runs) plus the nodes the run's speciation added.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from toolfactory.models import DomainNode

DEPTH = 4  # domain, subdomain, fine-grained domain, functionality


def _key(path: Iterable[str]) -> tuple[str, ...]:
    return tuple(" ".join(part.split()).casefold() for part in path)


class ContextTree:
    def __init__(self, nodes: Iterable[DomainNode] = ()) -> None:
        self._nodes: dict[tuple[str, ...], DomainNode] = {}
        for node in nodes:
            self.add(node)

    def add(self, node: DomainNode) -> bool:
        """Add `node` (and no parent it lacks is invented); False when it was known."""
        key = _key(node.path)
        if not key or key in self._nodes:
            return False
        self._nodes[key] = node
        return True

    def get(self, path: Iterable[str]) -> DomainNode:
        return self._nodes[_key(path)]

    def __contains__(self, path: Iterable[str]) -> bool:
        return _key(path) in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def nodes(self) -> list[DomainNode]:
        return sorted(self._nodes.values(), key=lambda n: _key(n.path))

    def children(self, path: list[str]) -> list[DomainNode]:
        key = _key(path)
        return [n for k, n in sorted(self._nodes.items()) if len(k) == len(key) + 1 and k[: len(key)] == key]

    def at_depth(self, depth: int) -> list[DomainNode]:
        return [n for k, n in sorted(self._nodes.items()) if len(k) == depth]

    def sample_subtree(self, rng: random.Random, size: int) -> tuple[DomainNode, list[DomainNode]] | None:
        """Adaptation: a fine-grained domain and up to `size` of its functionalities, chosen at random;
        None while the tree has no functionality yet."""
        parents = [n for n in self.at_depth(DEPTH - 1) if self.children(n.path)]
        if not parents:
            return None
        parent = rng.choice(parents)
        leaves = self.children(parent.path)
        return parent, rng.sample(leaves, min(size, len(leaves)))
