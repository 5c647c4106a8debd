"""The Prefect flows of toolfactory (see docs/architecture.md §5)."""

from flows import failure_log

failure_log.install()  # a worker imports this package before it runs a flow
