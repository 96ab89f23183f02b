"""Druid 38.0.0's globs, projection matchers, fingerprints and Java renderings (partial_load.py).

Ported from Druid 38.0.0 (commit ``aedca20599``), with Druid's values: ``rules/GlobsTest``,
``rules/ExactProjectionPartialLoadMatcherTest``, ``rules/WildcardProjectionPartialLoadMatcherTest``,
``rules/PartialLoadMatcherTest``, ``loading/PartialLoadProfileTest`` (its request/loaded profiles and
refusals). Each test names its Druid test method. Not ported, having nothing to port: JSON round
trips of the Java objects (``testSerde*``), ``equals``/``hashCode`` contracts (``testEquals``,
``testMatchResultEquals``, ``testUnknownMatcherEquals``), interning and defensive copies
(``testInterningSharesReferenceForEquivalentProfiles``, ``testDefensiveCopyOfWrappedLoadSpec``), the
Java ``null`` fingerprint's ``NullPointerException`` (``testFingerprintRequired``: our refusal is
tested instead).

Druid's tests assert no fingerprint value (their ``v1:`` literals are arbitrary). The fingerprint
literals here were computed with Guava 33.6's ``Hashing.sha256()`` (``putUnencodedChars``,
``putByte``, ``putInt``, as Druid's matchers call it) on OpenJDK 17, independently of this code; the
Java renderings of numbers likewise come from that JDK's ``Double.toString``/``Float.toString``
(values on which JDK 17 and JDK 21, Druid 38's, agree), ``4.9E-324`` and ``1.4E-45`` from their
Javadoc (``Double.MIN_VALUE``, ``Float.MIN_VALUE``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from segment_balancer.druid.partial_load import (
    EMPTY_LOAD_FINGERPRINT,
    CannotMatch,
    ExactProjectionMatcher,
    GlobProjectionMatcher,
    PartialLoadProfile,
    SegmentShape,
    UnknownMatcher,
    cluster_group_fingerprint,
    compile_glob,
    compile_globs,
    glob_to_regex,
    java_double_str,
    java_float_str,
    java_str,
    matcher_from_json,
    matches_any,
    projection_fingerprint,
)

BASE_LOAD_SPEC = {"type": "local", "path": "/var/druid/segments/foo"}


def seg(projections) -> SegmentShape:
    """A segment with these projections (``NumberedShardSpec(0, 0)``, the base load spec), as the
    Druid tests' ``segmentWithProjections``."""
    return SegmentShape(projections=projections, partition_num=0, num_core_partitions=0, load_spec=BASE_LOAD_SPEC)


def names(result) -> list[str]:
    return result.wrapped_load_spec["projections"]


# ------------------------------------------------------------------------------- GlobsTest


@pytest.mark.parametrize(
    "glob, regex",
    [
        ("user_daily", "user_daily"),  # testLiteralGlobMatchesItself
        ("user_*", "user_.*"),  # testStarTranslatesToDotStar
        ("user_?", "user_."),  # testQuestionMarkTranslatesToDot
        # testRegexMetacharactersInLiteralPositionsAreEscaped
        ("user.daily", "user\\.daily"),
        ("a+b", "a\\+b"),
        ("(foo)", "\\(foo\\)"),
        ("a|b", "a\\|b"),
        ("^start", "\\^start"),
        ("end$", "end\\$"),
        # testBackslashEscapesGlobMetacharacters
        ("a\\*b", "a\\*b"),
        ("a\\?b", "a\\?b"),
        ("a\\\\b", "a\\\\b"),
    ],
)
def test_glob_to_regex(glob, regex):
    """GlobsTest: testLiteralGlobMatchesItself, testStarTranslatesToDotStar,
    testQuestionMarkTranslatesToDot, testRegexMetacharactersInLiteralPositionsAreEscaped,
    testBackslashEscapesGlobMetacharacters."""
    assert glob_to_regex(glob) == regex


def test_trailing_unescaped_backslash_is_rejected():
    """GlobsTest.testTrailingUnescapedBackslashIsRejected."""
    with pytest.raises(ValueError, match="ends with an unescaped backslash"):
        glob_to_regex("foo\\")
    with pytest.raises(ValueError, match="ends with an unescaped backslash"):
        compile_glob("foo\\")
    # an escaped backslash at the end is fine
    assert compile_glob("foo\\\\").matches("foo\\")


def test_compile_all():
    """GlobsTest: testCompileAllReturnsEmptyListForEmptyInput, testCompileAllCompilesEachPattern,
    testMatchesAnyReturnsTrueOnFirstHit, testMatchesAnyEmptyPatternListNeverMatches."""
    assert compile_globs([]) == ()
    compiled = compile_globs(["user_*", "report_?"])
    assert len(compiled) == 2
    assert compiled[0].fullmatch("user_daily")
    assert compiled[1].fullmatch("report_x")
    assert not compiled[1].fullmatch("report_xy")
    both = compile_globs(["user_*", "report_*"])
    assert matches_any("user_daily", both)
    assert matches_any("report_hourly", both)
    assert not matches_any("other", both)
    assert not matches_any("anything", ())


def test_compile_literal_star_and_others():
    """GlobsTest: testCompileLiteralStarReturnsMatchAny, testCompileGlobReturnsCompiledRegex,
    testCompileLiteralNullStringHasNoSpecialTreatment."""
    star = compile_glob("*")
    assert star.match_any and star.pattern is None
    assert star.matches(None) and star.matches("anything")
    us = compile_glob("us-*")
    assert not us.match_any and us.pattern is not None
    assert us.matches("us-east-1")
    assert not us.matches("eu-west")
    assert not us.matches(None)
    null = compile_glob("null")
    assert not null.match_any and null.pattern is not None
    assert null.matches("null")
    assert not null.matches("nullx")
    assert not null.matches(None)


@pytest.mark.parametrize("terminator", ["\n", "\r", "\u0085", "\u2028", "\u2029"])
def test_java_dot_refuses_line_terminators(terminator):
    """Java's ``.`` (no DOTALL) matches no line terminator, where Python's only refuses ``\\n``:
    ``*`` and ``?`` do not match across one, in ``compile_globs`` too (the literal ``*`` of a
    cluster-group pattern is match-any, no regex)."""
    assert not compile_glob("a?b").matches(f"a{terminator}b")
    assert not compile_glob("a*").matches(f"a{terminator}")
    assert not matches_any(f"x{terminator}y", compile_globs(["*"]))
    assert compile_glob("*").matches(f"x{terminator}y")
    assert compile_glob("a?b").matches("a\tb")
    # an escaped or literal terminator matches itself
    assert compile_glob(f"a{terminator}b").matches(f"a{terminator}b")


def test_question_mark_is_one_code_point():
    """Java's regex ``.`` takes a supplementary character (a surrogate pair) as one, as Python does."""
    assert compile_glob("a?b").matches("a\U0001f600b")
    assert not compile_glob("a??b").matches("a\U0001f600b")


def test_python_regex_syntax_is_literal():
    """Characters special to Python's regex but not escaped by Druid (``-``, ``#``, space) or escaped
    by it stay literal."""
    for glob, name, hit in [
        ("a-b", "a-b", True),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("{1}", "{1}", True),
        ("a b#c", "a b#c", True),
        ("x\\y", "xy", True),  # an escaped ordinary character is itself
    ]:
        assert compile_glob(glob).matches(name) is hit, glob


# --------------------------------------------------------------- ExactProjectionPartialLoadMatcherTest


def test_exact_match_produces_result_when_intersection_non_empty():
    """ExactProjectionPartialLoadMatcherTest.testMatchProducesResultWhenIntersectionNonEmpty."""
    result = ExactProjectionMatcher(("c", "a", "x")).match(seg(["a", "b", "c"]))
    assert result is not None
    wrapped = result.wrapped_load_spec
    assert wrapped["type"] == "partialProjection"
    assert wrapped["delegate"] == BASE_LOAD_SPEC
    assert wrapped["projections"] == ["a", "c"]
    assert wrapped["fingerprint"] == result.fingerprint
    assert result.fingerprint.startswith("v1:")
    assert len(result.fingerprint) == len("v1:") + 16
    assert result.kind == "projection" and result.parts == ("a", "c") and not result.is_empty
    assert set(wrapped) == {"type", "delegate", "projections", "fingerprint"}


def test_exact_no_match():
    """ExactProjectionPartialLoadMatcherTest: testMatchReturnsNullWhenNoIntersection,
    testMatchReturnsNullForProjectionAgnosticSegment, testMatchReturnsNullForEmptyProjectionsList."""
    assert ExactProjectionMatcher(("x", "y")).match(seg(["a", "b"])) is None
    assert ExactProjectionMatcher(("a",)).match(seg(None)) is None
    assert ExactProjectionMatcher(("a",)).match(seg([])) is None


@pytest.mark.parametrize("raw", [None, []])
def test_exact_rejects_null_or_empty_names(raw):
    """ExactProjectionPartialLoadMatcherTest: testConstructorRejectsNullNames,
    testConstructorRejectsEmptyNames."""
    with pytest.raises(ValueError, match="names must not be null or empty"):
        matcher_from_json({"type": "exactProjection", "names": raw})
    with pytest.raises(ValueError, match="names must not be null or empty"):
        ExactProjectionMatcher(())


def test_exact_sorts_and_deduplicates():
    """ExactProjectionPartialLoadMatcherTest.testMatchSortsAndDeduplicates."""
    result = ExactProjectionMatcher(("c", "a", "a", "b")).match(seg(["a", "b", "c"]))
    assert names(result) == ["a", "b", "c"]


# ----------------------------------------------------------- WildcardProjectionPartialLoadMatcherTest


@pytest.mark.parametrize("raw", [None, []])
def test_glob_rejects_null_or_empty_patterns(raw):
    """WildcardProjectionPartialLoadMatcherTest: testConstructorRejectsNullPatterns,
    testConstructorRejectsEmptyPatterns."""
    with pytest.raises(ValueError, match="patterns must not be null or empty"):
        matcher_from_json({"type": "globProjection", "patterns": raw})


@pytest.mark.parametrize(
    "patterns, exclude, projections, expected",
    [
        (["*"], None, ["alpha", "beta", "gamma"], ["alpha", "beta", "gamma"]),  # testMatchStarMatchesAll
        (["user_*"], None, ["user_daily", "user_hourly", "session_daily"], ["user_daily", "user_hourly"]),
        (["p?"], None, ["p1", "p2", "pxx", "q1"], ["p1", "p2"]),  # testMatchSingleCharGlob
        (["*_daily"], None, ["user_daily", "session_daily", "user_hourly"], ["session_daily", "user_daily"]),
        (
            ["user_*_v2"],
            None,
            ["user_daily_v2", "user_hourly_v2", "user_daily", "session_daily_v2"],
            ["user_daily_v2", "user_hourly_v2"],
        ),  # testMatchMidStringGlob
        (["User_*"], None, ["user_daily", "User_daily"], ["User_daily"]),  # testMatchIsCaseSensitive
        (["user_*"], None, ["session_daily", "session_hourly", "other"], None),  # testMatchReturnsNullWhenNoPatternsHit
        (
            ["user_*", "session_d*"],
            None,
            ["user_daily", "session_daily", "session_hourly", "other"],
            ["session_daily", "user_daily"],
        ),  # testMultiplePatternsUnioned
        (["a.b"], None, ["a.b", "axb"], ["a.b"]),  # testEscapesRegexMetachars
        (["foo\\*bar"], None, ["foo*bar", "fooXYZbar", "foo*bar*baz"], ["foo*bar"]),  # testEscapesAsterisk
        (["foo\\?bar"], None, ["foo?bar", "fooXbar"], ["foo?bar"]),  # testEscapesQuestionMark
        (["foo\\\\bar"], None, ["foo\\bar", "foobar"], ["foo\\bar"]),  # testEscapesBackslash
        (
            ["user_*"],
            ["user_daily"],
            ["user_daily", "user_hourly", "user_weekly"],
            ["user_hourly", "user_weekly"],
        ),  # testExcludeLiteralRemovesMatchedName
        (
            ["*"],
            ["user_*"],
            ["user_daily", "user_hourly", "session_daily", "other"],
            ["other", "session_daily"],
        ),  # testExcludePatternRemovesMatchingNames
        (
            ["*"],
            ["user_*", "session_temp_*"],
            ["user_daily", "session_temp_x", "session_daily", "other"],
            ["other", "session_daily"],
        ),  # testMultipleExcludePatternsUnioned
        (
            ["user_*"],
            ["session_*"],
            ["user_daily", "user_hourly", "session_daily"],
            ["user_daily", "user_hourly"],
        ),  # testExcludeNotMatchedIsNoop
        (["user_*"], ["user_*"], ["user_daily", "user_hourly"], None),  # testExcludeAllMatchedReturnsNull
    ],
)
def test_glob_projection_match(patterns, exclude, projections, expected):
    """WildcardProjectionPartialLoadMatcherTest: testMatchStarMatchesAll, testMatchPrefixGlob,
    testMatchSingleCharGlob, testMatchSuffixGlob, testMatchMidStringGlob, testMatchIsCaseSensitive,
    testMatchReturnsNullWhenNoPatternsHit, testMultiplePatternsUnioned, testEscapesRegexMetachars,
    testEscapesAsterisk, testEscapesQuestionMark, testEscapesBackslash,
    testExcludeLiteralRemovesMatchedName, testExcludePatternRemovesMatchingNames,
    testMultipleExcludePatternsUnioned, testExcludeNotMatchedIsNoop, testExcludeAllMatchedReturnsNull."""
    raw = {"type": "globProjection", "patterns": patterns}
    if exclude is not None:
        raw["excludePatterns"] = exclude
    result = matcher_from_json(raw).match(seg(projections))
    if expected is None:
        assert result is None
    else:
        assert names(result) == expected
        assert result.wrapped_load_spec["type"] == "partialProjection"


def test_glob_projection_agnostic_segment():
    """WildcardProjectionPartialLoadMatcherTest.testReturnsNullForProjectionAgnosticSegment."""
    matcher = GlobProjectionMatcher(("*",))
    assert matcher.match(seg(None)) is None
    assert matcher.match(seg([])) is None


@pytest.mark.parametrize("exclude", [None, ["foo\\"]])
def test_glob_rejects_trailing_backslash(exclude):
    """WildcardProjectionPartialLoadMatcherTest: testRejectsTrailingBackslash,
    testRejectsTrailingBackslashInExcludePatterns."""
    patterns = ["foo\\"] if exclude is None else ["*"]
    with pytest.raises(ValueError, match="ends with an unescaped backslash"):
        matcher_from_json({"type": "globProjection", "patterns": patterns, "excludePatterns": exclude})


def test_exclude_changes_fingerprint():
    """WildcardProjectionPartialLoadMatcherTest.testExcludeChangesFingerprint (with the values)."""
    shape = seg(["user_daily", "user_hourly"])
    without = GlobProjectionMatcher(("user_*",)).match(shape).fingerprint
    with_exclude = GlobProjectionMatcher(("user_*",), ("user_daily",)).match(shape).fingerprint
    assert without != with_exclude
    assert without == "v1:8b76c9806cafafc9"  # Guava: ["user_daily", "user_hourly"]
    assert with_exclude == "v1:4a52830254926730"  # Guava: ["user_hourly"]


# ---------------------------------------------------------------------------- PartialLoadMatcherTest


def test_fingerprint_stable_across_order_and_duplicates():
    """PartialLoadMatcherTest.testFingerprintStableAcrossEquivalentInputOrderAndDuplicates."""
    shape = seg(["a", "b", "c"])
    a = ExactProjectionMatcher(("a", "b")).match(shape).fingerprint
    b = ExactProjectionMatcher(("b", "b", "a")).match(shape).fingerprint
    assert a == b == "v1:0ffc67878b872d1e"  # Guava: ["a", "b"]


def test_fingerprint_differs_across_resolved_sets():
    """PartialLoadMatcherTest.testFingerprintDiffersAcrossDifferentResolvedSets."""
    shape = seg(["a", "b", "c"])
    ab = ExactProjectionMatcher(("a", "b")).match(shape).fingerprint
    ac = ExactProjectionMatcher(("a", "c")).match(shape).fingerprint
    assert ab != ac
    assert ac == "v1:2220700ac899df36"  # Guava: ["a", "c"]


def test_fingerprint_same_for_exact_and_glob_of_one_set():
    """PartialLoadMatcherTest.testFingerprintMatchesAcrossExactAndWildcardWhenResolvedSetIdentical."""
    shape = seg(["a", "ab"])
    exact = ExactProjectionMatcher(("a", "ab")).match(shape).fingerprint
    glob = GlobProjectionMatcher(("a*",)).match(shape).fingerprint
    assert exact == glob == "v1:42647997c81c5531"  # Guava: ["a", "ab"]


def test_unknown_matcher_type_never_matches():
    """PartialLoadMatcherTest: testUnknownTypeDeserializesToFallback, testUnknownMatcherDoesNotApply."""
    matcher = matcher_from_json({"type": "someFutureMatcherType", "someFutureField": ["x", "y"]})
    assert isinstance(matcher, UnknownMatcher)
    assert matcher.type == "someFutureMatcherType"
    assert matcher.match(seg(["a", "b"])) is None
    assert isinstance(matcher_from_json({"names": ["a"]}), UnknownMatcher)  # no type: the default


# ---------------------------------------------------------------------------------- fingerprints


@pytest.mark.parametrize(
    "parts, fingerprint",
    [
        (["a"], "v1:ea6fde9e840d240a"),
        (["a", "b"], "v1:0ffc67878b872d1e"),
        (["\u00e9t\u00e9", "\U0001f600"], "v1:4a2bc201ee0201c2"),  # UTF-16 code units, a surrogate pair
    ],
)
def test_projection_fingerprint_as_guava(parts, fingerprint):
    """Guava's sha256 of each name's UTF-16 code units (little-endian) and a zero byte."""
    assert projection_fingerprint(parts) == fingerprint


@pytest.mark.parametrize(
    "indices, fingerprint",
    [
        ([0], "v1:df3f619804a92fdb"),
        ([0, 1], "v1:01acecb507abfe1a"),
        ([0, 2], "v1:2fcd151b8295e8b3"),
        ([2], "v1:26b25d457597a7b0"),
        ([0, 1, 2], "v1:ad5dc1478de06a4c"),
        ([70000], "v1:39d44c5083db0e49"),
    ],
)
def test_cluster_group_fingerprint_as_guava(indices, fingerprint):
    """Guava's sha256 of each index as ``putInt`` writes it (4 bytes, little-endian)."""
    assert cluster_group_fingerprint(indices) == fingerprint


def test_projections_sort_as_java_strings():
    """``TreeSet<String>`` sorts by UTF-16 code units: a supplementary character (a surrogate pair,
    0xD83D…) comes before U+FFFF, where Python's code-point order puts it after."""
    shape = seg(["\uffff", "\U0001f600", "a"])
    assert names(GlobProjectionMatcher(("*",)).match(shape)) == ["a", "\U0001f600", "\uffff"]


# ------------------------------------------------------------------------ PartialLoadProfileTest

WRAPPED = {
    "type": "partialProjection",
    "delegate": {"type": "local", "path": "/var/druid/segments/foo"},
    "projections": ["user_daily", "user_hourly"],
    "fingerprint": "v1:0123456789abcdef",
}


def test_profile_for_request_and_loaded():
    """PartialLoadProfileTest: testForRequest, testForLoaded."""
    request = PartialLoadProfile.for_request(WRAPPED, "v1:0123456789abcdef")
    assert request.wrapped_load_spec == WRAPPED
    assert request.fingerprint == "v1:0123456789abcdef"
    assert request.loaded_bytes is None
    loaded = PartialLoadProfile.for_loaded(WRAPPED, "v1:0123456789abcdef", 12345)
    assert loaded.wrapped_load_spec == WRAPPED and loaded.loaded_bytes == 12345


@pytest.mark.parametrize("wrapped", [None, {}])
def test_profile_rejects_empty_wrapped_load_spec(wrapped):
    """PartialLoadProfileTest: testForRequestRejectsNullWrappedLoadSpec,
    testForRequestRejectsEmptyWrappedLoadSpec, testForLoadedRejectsEmptyWrappedLoadSpec."""
    with pytest.raises(ValueError, match="wrappedLoadSpec must not be null or empty"):
        PartialLoadProfile.for_request(wrapped, "v1:0123456789abcdef")
    with pytest.raises(ValueError, match="wrappedLoadSpec must not be null or empty"):
        PartialLoadProfile.for_loaded(wrapped, "v1:0123456789abcdef", 100)


def test_profile_of_a_match_is_the_matchers_wire_form():
    """A request profile built from a match (as ``PartialLoadRule.run`` builds it) carries the
    matcher's wrapped load spec and fingerprint."""
    result = ExactProjectionMatcher(("user_hourly", "user_daily")).match(seg(["user_daily", "user_hourly"]))
    profile = PartialLoadProfile.for_request(result.wrapped_load_spec, result.fingerprint)
    assert profile.wrapped_load_spec == {**WRAPPED, "fingerprint": "v1:8b76c9806cafafc9"}


# ---------------------------------------------------------------------------------- CannotMatch


@pytest.mark.parametrize(
    "value, expected",
    [
        ("fullLoad", CannotMatch.FULL_LOAD),
        ("fallThrough", CannotMatch.FALL_THROUGH),
        (None, CannotMatch.FULL_LOAD),
        ("SOME_FUTURE_BEHAVIOR", CannotMatch.FULL_LOAD),
        ("FALLTHROUGH", CannotMatch.FULL_LOAD),  # Druid's ids are matched exactly
    ],
)
def test_cannot_match_from_json(value, expected):
    """CannotMatchBehavior.fromString: unknown values are null, then the rule's default."""
    assert CannotMatch.from_json(value) is expected


def test_empty_load_fingerprint():
    assert EMPTY_LOAD_FINGERPRINT == "v1:partial-empty"


# ------------------------------------------------------------------------------- Java renderings


@pytest.mark.parametrize(
    "value, double_text, float_text",
    [
        (1.0, "1.0", "1.0"),
        (1e10, "1.0E10", "1.0E10"),
        (1e-5, "1.0E-5", "1.0E-5"),
        (0.1, "0.1", "0.1"),
        (123.456, "123.456", "123.456"),
        (1e7, "1.0E7", "1.0E7"),
        (9999999.0, "9999999.0", None),
        (0.001, "0.001", None),
        (1e-4, "1.0E-4", None),
        (-0.0, "-0.0", None),
        (0.0, "0.0", None),
        (1.5e300, "1.5E300", None),
        (100.0, "100.0", None),
        (1234567.0, "1234567.0", None),
        (12345678.9, "1.23456789E7", None),
        (-2.5, "-2.5", None),
        (5e-324, "4.9E-324", None),
        (float("inf"), "Infinity", None),
        (float("-inf"), "-Infinity", None),
        (float("nan"), "NaN", None),
        (3.4028235e38, None, "3.4028235E38"),
        (16777217.0, None, "1.6777216E7"),
        (0.3, None, "0.3"),
        (1.4e-45, None, "1.4E-45"),
    ],
)
def test_java_double_and_float_str(value, double_text, float_text):
    """``Double.toString`` and ``Float.toString`` (of the float32 value) as OpenJDK prints these
    (``4.9E-324`` and ``1.4E-45``: ``Double.MIN_VALUE``'s and ``Float.MIN_VALUE``'s Javadoc)."""
    if double_text is not None:
        assert java_double_str(value) == double_text
    if float_text is not None:
        assert java_float_str(float(np.float32(value))) == float_text


def test_java_str_of_json_values():
    """``Objects.toString`` of what Jackson reads untyped: lists and maps as ``AbstractCollection``
    and ``AbstractMap`` print them."""
    assert java_str(5) == "5"
    assert java_str(2**70) == str(2**70)
    assert java_str(True) == "true"
    assert java_str(1.5) == "1.5"
    assert java_str(None) == "null"
    assert java_str(["a", None, 1, 2.0]) == "[a, null, 1, 2.0]"
    assert java_str({"k": "v", "n": [1]}) == "{k=v, n=[1]}"


def test_matcher_refusals():
    """What Druid refuses when it builds a matcher, named in our words."""
    for raw, message in [
        ("exactProjection", "matcher must be an object"),
        ({"type": "exactProjection", "names": "a"}, "must be a list of strings"),
        ({"type": "exactProjection", "names": ["a", None]}, "must be a list of strings"),
        ({"type": "globProjection", "patterns": ["a"], "excludePatterns": "b"}, "must be a list of strings"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            matcher_from_json(raw)
