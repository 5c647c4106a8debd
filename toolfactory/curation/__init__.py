"""Curation of a run's accepted dialogues (ToolACE §4 and the ablations of §5.3).

``dedup``       exact and near-duplicate instructions and dialogues (MinHash LSH), across nights;
``complexity``  query-level complexity (eq. 1), easy/medium/hard subsets, the mode mix and
                steering it toward target proportions;
``diversity``   k-means clusters of the run's APIs, their coverage, low/medium/high subsets;
``pool_clusters`` clusters fitted once on the whole pool and kept in it, for every later run;
``records``     what these read of a dialogue (its query, the functions it uses);
``embeddings``  de-duplicated, batched embedding requests through the gateway.
"""

from toolfactory.curation.complexity import Level, mode_mix, query_complexity, steer, subsets, turn_mix, turns
from toolfactory.curation.dedup import (
    DEFAULT_THRESHOLD,
    SIGNATURE_VERSION,
    Deduplication,
    DialogueIndex,
    Match,
    deduplicate,
    exact_hash,
    signature_row,
)
from toolfactory.curation.diversity import (
    DEFAULT_CLUSTERS,
    DIVERSITY_LEVELS,
    Coverage,
    cluster_apis,
    coverage,
    dialogue_clusters,
    diversity_subsets,
)
from toolfactory.curation.embeddings import EMBEDDING_BATCH, embed_texts
from toolfactory.curation.records import (
    called_functions,
    function_key,
    function_text,
    offered_functions,
    query,
    used_functions,
)

__all__ = [
    "DEFAULT_CLUSTERS",
    "DEFAULT_THRESHOLD",
    "DIVERSITY_LEVELS",
    "EMBEDDING_BATCH",
    "SIGNATURE_VERSION",
    "Coverage",
    "Deduplication",
    "DialogueIndex",
    "Level",
    "Match",
    "called_functions",
    "cluster_apis",
    "coverage",
    "deduplicate",
    "dialogue_clusters",
    "diversity_subsets",
    "embed_texts",
    "exact_hash",
    "function_key",
    "function_text",
    "mode_mix",
    "offered_functions",
    "query",
    "query_complexity",
    "signature_row",
    "steer",
    "subsets",
    "turn_mix",
    "turns",
    "used_functions",
]
