"""Druid 38.0.0's cluster groups and the ``globClusterGroup`` matcher (partial_load.py).

Ported from Druid 38.0.0 (commit ``aedca20599``), with Druid's values:
``rules/WildcardClusterGroupPartialLoadMatcherTest`` and ``timeline/ClusterGroupTuplesTest`` (the
tuples read from the JSON Druid writes for them: ``clusteringColumns`` as a ``RowSignature``'s
``[{"name", "type"}]``, ``virtualColumns``, ``tuples``). Each test names its Druid test method.
Not ported, having nothing to port: JSON round trips of the Java objects (``testJsonRoundTrip*``,
``testOperatorVcJsonRoundTrip``, ``testVirtualColumnsOmittedFromJsonWhenEmpty``), ``equals`` and
``hashCode`` (``testEqualsAndHashCodeNullSafe``), immutability and interning
(``testTuplesAreImmutable``, ``testVirtualColumnInternerSharesAcrossInstances``,
``testVirtualColumnsDefaultEmpty``).

Fingerprint literals were computed with Guava 33.6's ``Hashing.sha256().putInt`` on OpenJDK 17,
independently of this code.
"""

from __future__ import annotations

import json

import pytest

from segment_balancer.druid.partial_load import (
    EMPTY_LOAD_FINGERPRINT,
    ClusterGroups,
    GlobClusterGroupMatcher,
    SegmentShape,
    matcher_from_json,
    payload_fields,
)

BASE_LOAD_SPEC = {"type": "local", "path": "/seg"}


def groups(columns, tuples, virtual_columns=None) -> ClusterGroups:
    """``ClusterGroupTuples`` as Druid writes it in a segment payload: ``columns`` is
    ``[(name, type)]``."""
    obj = {"clusteringColumns": [{"name": n, "type": t} for n, t in columns], "tuples": tuples}
    if virtual_columns is not None:
        obj["virtualColumns"] = virtual_columns
    return ClusterGroups.from_json(obj)


TENANT_REGION = [("tenant", "STRING"), ("region", "STRING")]


def segment(cluster_groups, partition_num=0, num_core_partitions=1) -> SegmentShape:
    """``segmentWithGroupsAndShardSpec`` (default ``NumberedShardSpec(0, 1)``)."""
    return SegmentShape(
        cluster_groups=cluster_groups,
        partition_num=partition_num,
        num_core_partitions=num_core_partitions,
        load_spec=BASE_LOAD_SPEC,
    )


def three_groups() -> SegmentShape:
    """(acme, us-east-1), (acme, us-west-2), (globex, us-east-1)."""
    return segment(groups(TENANT_REGION, [["acme", "us-east-1"], ["acme", "us-west-2"], ["globex", "us-east-1"]]))


def glob(patterns, exclude=None, virtual_columns=None) -> GlobClusterGroupMatcher:
    raw = {"type": "globClusterGroup", "patterns": patterns}
    if exclude is not None:
        raw["excludePatterns"] = exclude
    if virtual_columns is not None:
        raw["virtualColumns"] = virtual_columns
    return matcher_from_json(raw)


def indices(result) -> list[int]:
    return result.wrapped_load_spec["clusterGroupIndices"]


def lower_tenant(name: str) -> dict:
    """``ExpressionVirtualColumn(name, "lower(tenant)", STRING)`` as Druid writes it."""
    return {"type": "expression", "name": name, "expression": "lower(tenant)", "outputType": "STRING"}


def vc_clustered(*lower_tenants) -> SegmentShape:
    """``vcClusteredSegment``: clustered on the virtual column ``tenant_lower`` = lower(tenant)."""
    return segment(groups([("tenant_lower", "STRING")], [[t] for t in lower_tenants], [lower_tenant("tenant_lower")]))


# ------------------------------------------------------------ WildcardClusterGroupPartialLoadMatcherTest


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "globClusterGroup", "patterns": None},  # testConstructorRejectsNullPatterns
        {"type": "globClusterGroup", "patterns": []},  # testConstructorRejectsEmptyPatterns
        {"type": "globClusterGroup", "patterns": [{}]},  # testConstructorRejectsEmptyPatternMap
        {"type": "globClusterGroup", "patterns": [{"tenant": "*"}], "excludePatterns": [{}]},
        {"type": "globClusterGroup", "patterns": [None]},
        {"type": "globClusterGroup", "patterns": [{"tenant": None}]},  # Map.copyOf refuses a null glob
        {"type": "globClusterGroup", "patterns": [{"tenant": "x\\"}]},  # a bad glob
    ],
)
def test_constructor_refusals(raw):
    """WildcardClusterGroupPartialLoadMatcherTest: testConstructorRejectsNullPatterns,
    testConstructorRejectsEmptyPatterns, testConstructorRejectsEmptyPatternMap,
    testConstructorRejectsEmptyExcludePatternMap (and a null glob, a trailing backslash)."""
    with pytest.raises(ValueError):
        matcher_from_json(raw)


def test_non_clustered_segment_returns_none():
    """WildcardClusterGroupPartialLoadMatcherTest.testNonClusteredSegmentReturnsNull."""
    assert glob([{"tenant": "acme"}]).match(segment(None)) is None


@pytest.mark.parametrize(
    "patterns, exclude, expected",
    [
        ([{"tenant": "acme"}], None, [0, 1]),  # testSingleColumnExactMatch, testOmittedColumnIsWildcard
        ([{"region": "us-east-*"}], None, [0, 2]),  # testSingleColumnGlob
        ([{"tenant": "globex", "region": "us-east-*"}], None, [2]),  # testMultiColumnPatternWithExactAndGlob
        ([{"tenant": "acme"}], [{"region": "us-west-2"}], [0]),  # testExcludePatternRemovesGroups
        ([{"tenant": "acme"}, {"region": "us-east-1"}], None, [0, 1, 2]),  # testIndicesAreSortedAndDeduped
    ],
)
def test_three_group_matches(patterns, exclude, expected):
    """WildcardClusterGroupPartialLoadMatcherTest: testSingleColumnExactMatch, testSingleColumnGlob,
    testMultiColumnPatternWithExactAndGlob, testOmittedColumnIsWildcard,
    testExcludePatternRemovesGroups, testIndicesAreSortedAndDeduped."""
    result = glob(patterns, exclude).match(three_groups())
    assert result is not None
    assert indices(result) == expected
    assert result.parts == tuple(expected) and result.kind == "cluster_group"


def test_star_matches_all_including_null():
    """WildcardClusterGroupPartialLoadMatcherTest.testStarMatchesAllIncludingNullValuesAtThatColumn."""
    shape = segment(groups(TENANT_REGION, [["acme", "us-east-1"], ["acme", None], [None, "us-east-1"]]))
    assert indices(glob([{"region": "*"}]).match(shape)) == [0, 1, 2]


def test_omitted_column_matches_null():
    """WildcardClusterGroupPartialLoadMatcherTest.testOmittedColumnMatchesNullAtThatPosition."""
    shape = segment(groups(TENANT_REGION, [["acme", "us-east-1"], ["acme", None]]))
    assert indices(glob([{"tenant": "acme"}]).match(shape)) == [0, 1]


def test_non_star_glob_does_not_match_null():
    """WildcardClusterGroupPartialLoadMatcherTest.testNonStarGlobDoesNotMatchNull."""
    shape = segment(groups(TENANT_REGION, [["acme", "us-east-1"], ["acme", None]]))
    assert indices(glob([{"region": "us-*"}]).match(shape)) == [0]


def test_literal_string_null_does_not_match_null():
    """WildcardClusterGroupPartialLoadMatcherTest.testLiteralStringNullDoesNotMatchNullClusteringValue."""
    shape = segment(groups(TENANT_REGION, [["acme", None]]))
    result = glob([{"region": "null"}]).match(shape)
    assert result is not None
    assert indices(result) == []


def test_unknown_or_incompatible_columns_return_none():
    """WildcardClusterGroupPartialLoadMatcherTest: testUnknownColumnInPatternNoMatch,
    testIncompatibleClusteringReturnsNull."""
    assert glob([{"not_a_clustering_column": "anything"}]).match(three_groups()) is None
    region_only = segment(groups([("region", "STRING")], [["us-east-1"]]))
    assert glob([{"tenant": "acme"}]).match(region_only) is None


def test_compatible_when_any_pattern_resolves():
    """WildcardClusterGroupPartialLoadMatcherTest.testCompatibleWhenAnyPatternResolves."""
    tenant_only = segment(groups([("tenant", "STRING")], [["globex"]]))
    result = glob([{"tenant": "acme"}, {"region": "us-east-*"}]).match(tenant_only)
    assert result is not None
    assert indices(result) == []


def test_no_match_returns_empty_wire_form():
    """WildcardClusterGroupPartialLoadMatcherTest.testNoMatchReturnsEmptyWireForm."""
    result = glob([{"tenant": "nobody"}]).match(three_groups())
    assert result is not None
    assert result.wrapped_load_spec == {
        "type": "partialClusterGroup",
        "delegate": BASE_LOAD_SPEC,
        "clusterGroupIndices": [],
        "fingerprint": EMPTY_LOAD_FINGERPRINT,
    }
    assert result.is_empty and result.parts == ()


def test_fingerprint_stable_across_pattern_order():
    """WildcardClusterGroupPartialLoadMatcherTest.testFingerprintStableAcrossPatternOrder."""
    a = glob([{"tenant": "acme"}, {"region": "us-east-1"}]).match(three_groups())
    b = glob([{"region": "us-east-1"}, {"tenant": "acme"}]).match(three_groups())
    assert a.fingerprint == b.fingerprint == "v1:ad5dc1478de06a4c"  # Guava: [0, 1, 2]


def test_operator_vc_resolves_by_equivalence():
    """WildcardClusterGroupPartialLoadMatcherTest.testOperatorVcResolvesToClusteringVcByEquivalence."""
    matcher = glob([{"queryLower": "acme"}], virtual_columns=[lower_tenant("queryLower")])
    result = matcher.match(vc_clustered("acme", "globex"))
    assert result is not None
    assert indices(result) == [0]
    assert result.fingerprint == "v1:df3f619804a92fdb"  # Guava: [0]


def test_operator_vc_without_equivalence_is_non_matching():
    """WildcardClusterGroupPartialLoadMatcherTest.testOperatorVcWithoutEquivalenceIsNonMatching."""
    upper = {"type": "expression", "name": "queryUpper", "expression": "upper(tenant)", "outputType": "STRING"}
    assert glob([{"queryUpper": "ACME"}], virtual_columns=[upper]).match(vc_clustered("acme")) is None


def test_operator_vc_shadows_clustering_column():
    """WildcardClusterGroupPartialLoadMatcherTest.testOperatorVcShadowsClusteringColumnName."""
    shadow = {"type": "expression", "name": "tenant", "expression": "lower(otherCol)", "outputType": "STRING"}
    assert glob([{"tenant": "acme"}], virtual_columns=[shadow]).match(three_groups()) is None


def test_no_operator_vcs_keeps_direct_names():
    """WildcardClusterGroupPartialLoadMatcherTest.testNoOperatorVcsKeepsDirectNameMatching."""
    assert glob([{"tenant": "acme"}]).match(three_groups()) is not None


def test_equivalence_as_documented():
    """Our simplification of ``findEquivalent``: whitespace outside quotes and the case of the output
    type do not matter; another output type, another expression or a non-expression type does."""
    segment_vc = vc_clustered("acme")
    for vc, hit in [
        ({"type": "expression", "name": "q", "expression": " lower( tenant ) ", "outputType": "string"}, True),
        ({"type": "expression", "name": "q", "expression": "lower(tenant)", "outputType": "LONG"}, False),
        ({"type": "expression", "name": "q", "expression": "lower(tenant)"}, False),
        ({"type": "expression", "name": "q", "expression": "lower('ten ant')", "outputType": "STRING"}, False),
        ({"type": "mv-filtered", "name": "q", "delegate": "tenant", "values": ["a"]}, False),
    ]:
        assert (glob([{"q": "acme"}], virtual_columns=[vc]).match(segment_vc) is not None) is hit, vc
    spaced = segment(
        groups(
            [("t", "STRING")],
            [["acme"]],
            [{"type": "expression", "name": "t", "expression": "concat('a b', x)", "outputType": "STRING"}],
        )
    )
    same = {"type": "expression", "name": "q", "expression": "concat( 'a b' ,x )", "outputType": "STRING"}
    other = {"type": "expression", "name": "q", "expression": "concat('ab', x)", "outputType": "STRING"}
    assert glob([{"q": "acme"}], virtual_columns=[same]).match(spaced) is not None
    assert glob([{"q": "acme"}], virtual_columns=[other]).match(spaced) is None


def test_no_match_on_appended_or_coreless_segment_returns_none():
    """WildcardClusterGroupPartialLoadMatcherTest: testNoMatchOnAppendedSegmentReturnsNull,
    testNoMatchOnSegmentWithoutCorePartitionsReturnsNull."""
    one = groups(TENANT_REGION, [["acme", "us-east-1"]])
    nobody = glob([{"tenant": "nobody"}])
    assert nobody.match(segment(one, partition_num=2, num_core_partitions=2)) is None
    assert nobody.match(segment(one, partition_num=0, num_core_partitions=0)) is None
    assert nobody.match(segment(one, partition_num=0, num_core_partitions=None)) is None


def test_positive_match_on_appended_segment():
    """WildcardClusterGroupPartialLoadMatcherTest.testPositiveMatchOnAppendedSegmentStillReturnsWireForm."""
    appended = segment(groups(TENANT_REGION, [["acme", "us-east-1"]]), partition_num=2, num_core_partitions=2)
    assert indices(glob([{"tenant": "acme"}]).match(appended)) == [0]


def test_empty_fingerprint_stable_and_distinct():
    """WildcardClusterGroupPartialLoadMatcherTest: testEmptyWireFormFingerprintIsStableAcrossInvocations,
    testEmptyWireFormFingerprintDiffersFromPositiveMatch."""
    nobody = glob([{"tenant": "nobody"}])
    a, b = nobody.match(three_groups()), nobody.match(three_groups())
    assert a.fingerprint == b.fingerprint == "v1:partial-empty"
    real = glob([{"tenant": "acme"}]).match(three_groups())
    assert real.fingerprint == "v1:01acecb507abfe1a"  # Guava: [0, 1]
    assert indices(a) == [] and real.fingerprint != a.fingerprint


def test_typed_values_render_as_java():
    """A glob sees Java's ``toString`` of the canonical value: a DOUBLE 1 is ``1.0``, a LONG 1.9 is
    ``1`` (truncated), a FLOAT 0.1 is ``0.1`` (float32's shortest form)."""
    shape = segment(
        groups(
            [("d", "DOUBLE"), ("l", "LONG"), ("f", "FLOAT")],
            [[1, 1.9, 0.1], [1e10, -2, 1e-5]],
        )
    )
    assert indices(glob([{"d": "1.0", "l": "1", "f": "0.1"}]).match(shape)) == [0]
    assert indices(glob([{"d": "1.0E10", "l": "-2", "f": "1.0E-5"}]).match(shape)) == [1]
    assert indices(glob([{"d": "1"}]).match(shape)) == []


def test_duplicate_column_takes_its_last_position():
    """``RowSignature`` keeps a name listed twice with one type; ``indexOf`` is its last position."""
    shape = segment(groups([("t", "STRING"), ("t", "STRING")], [["a", "b"], ["b", "a"]]))
    assert indices(glob([{"t": "a"}]).match(shape)) == [1]


# ------------------------------------------------------------------------------ ClusterGroupTuplesTest


@pytest.mark.parametrize(
    "obj, message",
    [
        ({"tuples": [["acme", "us-east-1"]]}, "clusteringColumns must not be null or empty"),
        ({"clusteringColumns": [], "tuples": []}, "clusteringColumns must not be null or empty"),
        (
            {
                "clusteringColumns": [{"name": "tenant", "type": "STRING"}, {"name": "region", "type": "STRING"}],
                "tuples": [["acme"]],
            },
            "tuples[0] has size 1 but there are 2 clustering columns",
        ),
        (
            {
                "clusteringColumns": [{"name": "tenant", "type": "STRING"}, {"name": "region", "type": "STRING"}],
                "tuples": [["acme", "us-east-1"], None],
            },
            "tuples[1] has size null but there are 2 clustering columns",
        ),
        ({"clusteringColumns": [{"name": "tenant"}], "tuples": [["acme"]]}, "'tenant' has no declared type"),
        (
            {"clusteringColumns": [{"name": "arr", "type": "STRING_ARRAY"}], "tuples": [[["a"]]]},
            "has type STRING_ARRAY, which no tuple value can take",
        ),
        (
            {
                "clusteringColumns": [{"name": "tenant", "type": "STRING"}, {"name": "priority", "type": "LONG"}],
                "tuples": [["acme", "42"]],
            },
            "cannot coerce the value \"42\" of column 'priority' to LONG",
        ),
        ({"clusteringColumns": [{"name": "v", "type": "DOUBLE"}], "tuples": [["3.14"]]}, "to DOUBLE: not a number"),
        (
            {"clusteringColumns": [{"name": "priority", "type": "LONG"}], "tuples": [[True]]},
            "cannot coerce the value true of column 'priority' to LONG",
        ),
    ],
)
def test_cluster_group_tuples_refusals(obj, message):
    """ClusterGroupTuplesTest: testConstructorRejectsNullClusteringColumns,
    testConstructorRejectsEmptyClusteringColumns, testConstructorRejectsTupleLengthMismatch,
    testConstructorRejectsNullTuple, testConstructorRejectsUntypedClusteringColumn,
    testConstructorRejectsUnsupportedColumnType, testCoercionStringRejectedForLong,
    testCoercionStringRejectedForDouble, testCoercionBooleanRejectedForLong."""
    with pytest.raises(ValueError) as exc:
        ClusterGroups.from_json(obj)
    assert message in str(exc.value)


def test_cluster_group_tuples_accepted():
    """ClusterGroupTuplesTest: testConstructorAllowsEmptyTuples, testConstructorAllowsNullTuplesList,
    testNullsAllowedAtAnyTuplePosition, testCoercionIntegerToLong, testCoercionDoubleToFloat,
    testCoercionAcceptsAnyTypeForString, testVirtualColumnsAreStored."""
    assert groups(TENANT_REGION, []).tuples == ()
    assert groups(TENANT_REGION, None).tuples == ()
    nulls = groups(TENANT_REGION, [[None, "us-east-1"], ["acme", None], [None, None]])
    assert nulls.tuples == ((None, "us-east-1"), ("acme", None), (None, None))
    priority = groups([("tenant", "STRING"), ("priority", "LONG")], [["acme", 5], ["globex", 5_000_000_000]])
    assert priority.tuples == (("acme", 5), ("globex", 5_000_000_000))
    assert all(type(t[1]) is int for t in priority.tuples)
    temp = groups([("temp", "FLOAT")], [[98.6]])
    assert abs(temp.tuples[0][0] - 98.6) < 1e-4 and temp.tuples[0][0] != 98.6  # the float32 value
    assert temp.rendered == (("98.6",),)
    assert groups([("v", "STRING")], [[7]]).tuples == (("7",),)
    vc = groups([("tenant_lower", "STRING")], [["acme"]], [lower_tenant("tenant_lower")])
    assert vc.virtual_columns == (lower_tenant("tenant_lower"),)


def test_unsupported_type_refused_only_for_values():
    """``coerceValue`` returns null before it looks at the type: a null in a column of another type
    (or of an unknown one, which has no type to refuse) is fine, no tuple at all too."""
    assert groups([("arr", "ARRAY<STRING>")], [[None]]).tuples == ((None,),)
    assert groups([("x", None)], []).tuples == ()
    assert groups([("x", "notAType")], []).columns[0].type is None
    with pytest.raises(ValueError, match="no declared type"):
        groups([("x", "notAType")], [[None]])


def test_numbers_as_java_reads_them():
    """``Number.longValue``/``doubleValue``/``floatValue`` and ``Objects.toString`` of what Jackson
    reads: an integer past 64 bits wraps (``BigInteger.longValue``), a double truncates and
    saturates, ``(float)`` of a long rounds once (2^53 + 1 to 2^53; 2^24 + 3 to 2^24 + 4, half to
    even), a STRING column takes a JSON list as ``[a, 1]``."""
    longs = groups([("l", "LONG")], [[2**64 + 5], [-1.9], [1e300], [2**63]])
    assert [t[0] for t in longs.tuples] == [5, -1, 2**63 - 1, -(2**63)]
    floats = groups([("f", "FLOAT")], [[2**53 + 1], [2**24 + 3], [2**24 + 1], [1e300]])
    assert [t[0] for t in floats.tuples] == [2.0**53, 2.0**24 + 4, 2.0**24, float("inf")]
    assert floats.rendered[2:] == (("1.6777216E7",), ("Infinity",))
    strings = groups([("s", "STRING")], [[["a", 1]], [{"k": 2.0}], [False]])
    assert strings.tuples == (("[a, 1]",), ("{k=2.0}",), ("false",))


def test_column_type_spellings():
    """``ColumnType.fromString`` is case-insensitive for the primitive types; one name with two
    types is refused (``RowSignature``), a bad array element type too."""
    assert groups([("a", "long")], [[1]]).columns[0].type == "LONG"
    assert groups([("a", {"type": "double"})], [[1]]).rendered == (("1.0",),)
    with pytest.raises(ValueError, match="two types"):
        groups([("a", "LONG"), ("a", "STRING")], [])
    with pytest.raises(ValueError, match="array element type is unknown"):
        groups([("a", "ARRAY<nope>")], [])


def test_virtual_column_refusals():
    """``VirtualColumns.create``: a name is required, ``__time`` is not one, no name twice."""
    for vcs, message in [
        ([{"type": "expression", "expression": "x"}], "has no name"),
        ([{"type": "expression", "name": "__time", "expression": "x"}], "__time"),
        ([lower_tenant("a"), lower_tenant("a")], "used twice"),
        (["x"], "must be a virtual column object"),
    ]:
        with pytest.raises(ValueError, match=message):
            groups([("a", "STRING")], [], vcs)


# ------------------------------------------------------------------------------------ payload


def test_payload_fields():
    """``projections`` is Druid's comma-joined string (empty names dropped); ``clusterGroups`` comes
    back as compact JSON text that :meth:`ClusterGroups.parse` reads to the same groups."""
    cg = {"clusteringColumns": [{"name": "tenant", "type": "STRING"}], "tuples": [["acme"], [None]]}
    projections, text = payload_fields({"projections": "a,,b,", "clusterGroups": cg})
    assert projections == ["a", "b"]
    assert json.loads(text) == cg and " " not in text
    assert ClusterGroups.parse(text) == ClusterGroups.from_json(cg)
    assert payload_fields({"projections": ""}) == ([], None)
    assert payload_fields({"projections": ["a", ""]}) == (["a"], None)
    assert payload_fields({}) == (None, None)
    with pytest.raises(ValueError, match="projections must be a comma-separated string"):
        payload_fields({"projections": 5})
    with pytest.raises(ValueError, match="clusteringColumns must not be null or empty"):
        payload_fields({"clusterGroups": {"tuples": []}})


def test_shape_from_columns():
    """A shape from the timeline table's columns: ``cluster_groups`` JSON text parsed."""
    text = json.dumps({"clusteringColumns": [{"name": "tenant", "type": "STRING"}], "tuples": [["acme"]]})
    shape = SegmentShape.from_columns(["p"], text, 0, 1)
    assert shape.projections == ("p",)
    assert indices(glob([{"tenant": "acme"}]).match(shape)) == [0]
    assert SegmentShape.from_columns(None, None, 3, None) == SegmentShape(None, None, 3, None)
    assert SegmentShape.from_columns("a,b", None, 0, 0).projections == ("a", "b")
    assert SegmentShape.from_columns("", None, 0, 0).projections == ()
    with pytest.raises(ValueError, match="not JSON"):
        SegmentShape.from_columns(None, "{", 0, 0)
