"""What Druid gives us, in Druid's terms: the snapshot files and their readers (:mod:`.snapshot`),
segment ids, instants, retention rules, the segment timeline, the ``druid_segments`` SQL importer
and the Coordinator's metric names. May import :mod:`segment_balancer.common` only; the snapshot
readers of the big files use Spark."""
