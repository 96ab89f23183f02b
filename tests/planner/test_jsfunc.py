"""Tests of jsfunc: expected values are what node 20 (V8) prints for the same JavaScript."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess

import pytest

from segment_balancer.planner.config import DEFAULT_FUNCTION
from segment_balancer.planner.jsfunc import JsFunctionError, compile_function, js_log, js_log10, js_log2

BASE = {"numBestServersChoosingFunctionDefaultLogBase": 5}


def expr(text: str, a: float = 0.0, b: float = 0.0) -> float:
    return compile_function(f"function (a, b) {{ return {text}; }}")(a, b)


# node: Math.log(n)/Math.log(5) for these n
@pytest.mark.parametrize("n, ratio", [
    (1, 0.0), (4, 0.8613531161467861), (5, 1.0), (24, 1.9746358687061647), (25, 2.0),
    (26, 2.0243691992404753), (124, 2.995009331124109), (125, 3.0000000000000004),
    (126, 3.0049509021675314), (624, 3.9990050679466402), (625, 4.0), (15625, 6.000000000000001),
])
def test_log_ratio_is_bit_exact_with_v8(n, ratio):
    assert js_log(n) / js_log(5) == ratio


@pytest.mark.parametrize("n, extra", [(1, 0), (4, 0), (5, 1), (6, 1), (24, 1), (25, 2), (26, 2),
                                      (124, 2), (125, 3), (126, 3), (624, 3), (625, 4)])
@pytest.mark.parametrize("t", [1, 2, 3])
def test_default_function(n, t, extra):
    f = compile_function(DEFAULT_FUNCTION, BASE)
    assert f(n, t) == t + extra


def test_v8_logs_differ_from_libm_where_v8_does():
    # node: Math.log(3) = 1.0986122886681096; glibc gives ...098
    assert js_log(3) == 1.0986122886681096
    assert js_log(10) == 2.302585092994046
    assert js_log(1000) / js_log(10) == 2.9999999999999996
    assert js_log10(1000) == 3.0 and js_log2(8) == 3.0
    assert js_log10(11) == 1.041392685158225
    assert js_log(0.0) == -math.inf and math.isnan(js_log(-1.0)) and js_log(1.0) == 0.0


@pytest.mark.parametrize("text, expected", [
    ("Math.round(2.5)", 3.0), ("Math.round(-2.5)", -2.0), ("Math.round(0.49999999999999994)", 0.0),
    ("1 / Math.round(-0.4)", -math.inf), ("7 % -3", 1.0), ("-7 % 3", -1.0), ("5.5 % 2", 1.5),
    ("1 / 0", math.inf), ("-1 / 0", -math.inf), ("(3 > 2) + 1", 2.0), ("(1 == (2 > 1)) ? 7 : 8", 7.0),
    ("(1 === (2 > 1)) ? 7 : 8", 8.0), ("2 ? 4 : 5", 4.0), ("0 ? 4 : 5", 5.0), ("Math.min()", math.inf),
    ("Math.max()", -math.inf), ("Math.pow(0, -1)", math.inf), ("Math.pow(-0, -3)", -math.inf),
    ("Math.abs(-3)", 3.0), ("1 - - 2", 3.0), ("-2 * -3 % 4", 2.0), ("10 - 4 - 3", 3.0),
    ("(2 < 3) == 1", 1.0), ("1 ? 2 : 3 ? 4 : 5", 2.0), ("0 ? 2 : 0 ? 4 : 5", 5.0),
    ("Math.max(1, 7, 3) + Math.min(4, 2)", 9.0), ("Math.ceil(-0.5) === 0 ? 1 : 2", 1.0),
    ("2 + 3 * 4 - 6 / 3", 12.0), ("1e3 + .5", 1000.5), ("1 != 1 ? 1 : 0", 0.0), ("2 !== 3", 1.0),
])
def test_js_semantics(text, expected):
    assert expr(text) == expected


@pytest.mark.parametrize("text", ["0 / 0", "Math.pow(1, 1 / 0)", "Math.pow(-8, 1 / 3)", "Math.sqrt(-1)",
                                  "5 % 0", "Math.max(1, 0 / 0)"])
def test_nan_results(text):
    assert math.isnan(expr(text))


def test_parameters_any_names_whitespace_and_optional_semicolon():
    f = compile_function("function(numServers,\n  target)\n{\n return target+numServers*2 }")
    assert f(3, 1) == 7.0
    assert compile_function("function named (x, y) { return x - y; }")(5, 2) == 3.0


@pytest.mark.parametrize("text, needle", [
    ("function (a, b) { return a + foo; }", "'foo' at line 1, column 30"),
    ("function (a, b) { return Math.exp(a); }", "Math.exp at line 1, column 26"),
    ("function (a, b) { return Math.PI; }", "Math.PI"),
    ("function (a, b) { return a = 1; }", "'=' (assignment is not allowed)"),
    ("function (a, b) { return 'x'; }", "\"'\""),
    ("function (a, b) { while (a) {} return a; }", "'while'"),
    ("function (a, b) { return a; } b", "'b'"),
    ("function (a, a) { return a; }", "duplicate parameter"),
    ("function (a) { return a; }", "expected ','"),
    ("function (a, b) { return a ** 2; }", "'**'"),
    ("function (a, b) { return +a; }", "'+'"),
    ("function (a, b) { return Math.floor(a, b); }", "takes 1 argument"),
    ("function (a, b) { return 0x10; }", "malformed number"),
    ("function (a, b) { return a && b; }", "'&'"),
    ("function (a, b) { return a--b; }", "'--'"),
    ("function (a, b) { return " + "+".join(["a"] * 150) + "; }", "too long"),
    ("function (a, b) { return this; }", "'this'"),
    ("() => 1", "expected 'function'"),
    ("function (a, b) { return (a; }", "expected ')'"),
    ("function (a, b) {\n  return\n   a + ;\n}", "line 3, column 8"),
])
def test_rejections_name_token_and_position(text, needle):
    with pytest.raises(JsFunctionError) as info:
        compile_function(text)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_deep_nesting_is_rejected_not_crashing():
    with pytest.raises(JsFunctionError, match="nested too deeply"):
        compile_function("function (a, b) { return " + "(" * 500 + "a" + ")" * 500 + "; }")


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_random_expressions_agree_with_node():
    rng = random.Random(7)
    atoms = ["a", "b", "0", "1", "2.5", "0.1", "5", "1e-3"]
    funcs = ["Math.floor", "Math.ceil", "Math.round", "Math.log", "Math.log10", "Math.sqrt", "Math.abs"]

    def gen(depth: int) -> str:
        r = rng.random()
        if depth == 0 or r < 0.25:
            return rng.choice(atoms)
        if r < 0.45:
            return f"{rng.choice(funcs)}({gen(depth - 1)})"
        if r < 0.5:
            return f"-({gen(depth - 1)})"
        if r < 0.55:
            return f"({gen(depth - 1)} {rng.choice(['<', '>=', '==', '!=='])} {gen(depth - 1)} ? {gen(depth - 1)} : {gen(depth - 1)})"
        if r < 0.6:
            return f"Math.{rng.choice(['min', 'max'])}({gen(depth - 1)}, {gen(depth - 1)})"
        return f"({gen(depth - 1)} {rng.choice(['+', '-', '*', '/', '%'])} {gen(depth - 1)})"

    cases = [(gen(4), rng.randint(0, 300), rng.randint(0, 4)) for _ in range(400)]
    script = ("const cases = " + json.dumps(cases) + ";\nconsole.log(JSON.stringify(cases.map(([e, a, b]) => "
              "{ const v = new Function('a', 'b', 'return ' + e)(a, b); return Object.is(v, -0) ? '-0' : String(v); })));")
    out = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    for (text, a, b), js in zip(cases, out):
        ours = expr(text, a, b)
        want = float(js)
        assert (ours == want and math.copysign(1, ours) == math.copysign(1, want)) or (math.isnan(ours) and math.isnan(want)), text
