"""The run machinery: a run's manifest and shard plan, the execution of one shard, fan-in
supplements, integrity checks, the root's lease, the driver's lifetime, the pool files a run
publishes, and the stats it keeps (DuckDB, the run record, their sync with storage).

Above the stages (it plans and runs them) and below the flows, which orchestrate it through
:class:`toolfactory.run.bookkeeping.Bookkeeping`.
"""
