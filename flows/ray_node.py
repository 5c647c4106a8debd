"""Ray's command line with a run's patience for a new node: `python -m flows.ray_node start …`.

`ray start` (a cluster's head or worker node, as docker-compose.yml and the tests start them)
fails on a busy machine for the reasons a run's own local Ray did: Ray's fixed 30 s for the new
node to register, and its processes' own start-up waits. This is `ray` itself, with those waits
stretched to `orchestration.ray_start_timeout_s` (from the environment as every setting is:
`TOOLFACTORY_ORCHESTRATION__RAY_START_TIMEOUT_S`, default 300 s), as :mod:`flows.runtime` does for a
run's local Ray.
"""

from __future__ import annotations

import os
import sys
import time

from flows.runtime import node_registration_until, ray_waits
from toolfactory.config.run import OrchestrationConfig


def main() -> None:
    name = "TOOLFACTORY_ORCHESTRATION__RAY_START_TIMEOUT_S"
    timeout_s = OrchestrationConfig.model_validate({"ray_start_timeout_s": os.environ[name]} if name in os.environ else {}).ray_start_timeout_s
    deadline = time.monotonic() + timeout_s
    os.environ.update(ray_waits(timeout_s))
    from ray.scripts.scripts import main as ray_main

    sys.argv[0] = "ray"
    with node_registration_until(deadline):
        ray_main()


if __name__ == "__main__":
    main()
