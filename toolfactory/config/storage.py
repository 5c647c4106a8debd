"""The `storage` and `stats` sections: the storage root and the local stats cache."""

from __future__ import annotations

from pydantic import Field, field_validator

from toolfactory.config.section import Section


class StorageConfig(Section):
    """Where shards, manifests and the LLM cache live."""

    root: str = "./toolfactory-data"
    """A local folder, or s3://bucket/prefix (AWS or MinIO; credentials from env or IAM)."""
    endpoint_url: str | None = None
    """S3 endpoint for MinIO or another S3-compatible server, e.g. http://localhost:9000."""
    region: str | None = None
    """S3 region."""
    max_attempts: int = Field(8, ge=1, le=50)
    """Attempts of one S3 request on connection errors, timeouts, 5xx answers and throttling, with
    exponential backoff (AWS standard retry mode); after them a shard fails as transient and its
    task's retries take over."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds to connect, and to wait for an answer, per S3 request."""

    @property
    def is_s3(self) -> bool:
        return self.root.startswith("s3://")


class StatsConfig(Section):
    """The DuckDB file that holds runs, shard status and per-stage metrics."""

    path: str | None = None
    """Local DuckDB file, a cache of what the storage root holds (run records and shard metrics):
    rebuilt or brought up to date from the root when it is missing or stale. Default
    `<root>/stats.duckdb` for local storage and, for S3, one file per root in the user's cache
    folder (`$XDG_CACHE_HOME/toolfactory/stats/<hash of the root>.duckdb`)."""

    @field_validator("path")
    @classmethod
    def _local(cls, value: str | None) -> str | None:
        if value is not None and "://" in value:
            # The stats of an S3 root live in the root itself (run records, metric sidecars).
            raise ValueError("not a local file: stats.path names the local cache of the stats; "
                             "the stats of an S3 root are read from storage.root")
        return value
