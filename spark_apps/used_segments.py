"""Stage 0 ``used_segments``: which used segments are visible, standby or overshadowed (the versioned
segment timeline with minor compaction, Druid issue #7491)."""

from segment_balancer.spark.apps import main

if __name__ == "__main__":
    main("used_segments")
