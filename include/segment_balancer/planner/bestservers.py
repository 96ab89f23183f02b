"""``numBestServersChoosingFunction`` evaluated by V8 (seed "Configurations"; ALGORITHM.md "Where a segment goes").

The seed configures the number of best servers as JavaScript text, by default::

    function (numServersInTier, targetReplicants) { return targetReplicants +
        Math.floor(Math.log(numServersInTier) / Math.log(numBestServersChoosingFunctionDefaultLogBase)); }

``compile_function`` evaluates the text once, as an expression, in its own V8 context (the PyPI
package ``mini-racer``): the whole language, nothing of the host (no I/O, no modules). The text must
evaluate to a function; it is called as ``f(numServersInTier, targetReplicants)``.

Limits: evaluating the text takes at most ``COMPILE_TIMEOUT_MS`` milliseconds, each call
``CALL_TIMEOUT_MS`` milliseconds; the context's heap at most ``MEMORY_LIMIT_BYTES`` bytes (mini-racer's
hard limit, checked as V8 collects garbage: one allocation beyond V8's own heap limit, about 1.5 GB,
still aborts the process). ArrayBuffer, SharedArrayBuffer, the typed arrays, DataView, Atomics and
WebAssembly are removed, as their memory is outside the heap the limit counts. So that B is the same
on every run, ``Math.random``, ``Date.now``, ``Date()``, ``new Date()`` (no argument) and
``setTimeout`` throw, and ``Temporal`` is removed. The text is at most ``MAX_TEXT_CHARS`` characters.

Results: a number as is (NaN and +-Infinity included); a boolean as ``Number()`` converts it (1, 0);
any other result (string, undefined, null, object, BigInt, symbol) is refused, as a missing
``return`` would otherwise pass silently.

Caching: a process keeps one compiled function per (text, constants) (``compile_function`` returns
the same object), and each compiled function calls V8 once per distinct (numServersInTier,
targetReplicants) pair; ``compile_function`` evaluates ``f(1, 1)`` once, so that a function that
throws, loops or returns a non-number is refused before any stage runs.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from py_mini_racer import JSEvalException, JSOOMException, JSParseException, JSTimeoutException, MiniRacer

__all__ = [
    "BestServersError",
    "BestServersFunction",
    "compile_function",
    "KEY",
    "COMPILE_TIMEOUT_MS",
    "CALL_TIMEOUT_MS",
    "MEMORY_LIMIT_BYTES",
    "MAX_TEXT_CHARS",
]

KEY = "numBestServersChoosingFunction"
COMPILE_TIMEOUT_MS = 1000
"""Milliseconds the context may spend evaluating the function text."""
CALL_TIMEOUT_MS = 1000
"""Milliseconds one call ``f(n, t)`` may take."""
MEMORY_LIMIT_BYTES = 64 * 1024 * 1024
"""V8 heap of one context, bytes (mini-racer's hard memory limit)."""
_MIB = f"{MEMORY_LIMIT_BYTES // 2**20} MiB ({MEMORY_LIMIT_BYTES} bytes)"
MAX_TEXT_CHARS = 10_000
PROBE = (1, 1)
"""The pair ``compile_function`` evaluates to check the function."""
_CACHE_SIZE = 16  # compiled functions kept per process (one V8 context and one thread each)
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")

# Runs before the text, in the fresh context: removes what the function must not use, and defines
# (read-only) the installer that wraps the function so that a call returns a number or a message.
_PRELUDE = r"""
(function (g) {
  "use strict";
  const str = String, json = JSON.stringify, isArray = Array.isArray, Err = Error, define = Object.defineProperty;
  const refuse = (what) => function () { throw new Err(what + " is not available: B must not change between runs"); };
  Math.random = refuse("Math.random");
  const D = g.Date;
  D.now = refuse("Date.now");
  const SafeDate = new Proxy(D, {
    apply: refuse("Date()"),
    construct(target, args, newTarget) {
      if (args.length === 0) refuse("new Date()")();
      return Reflect.construct(target, args, newTarget);
    },
  });
  D.prototype.constructor = SafeDate;
  g.Date = SafeDate;
  for (const name of ["Temporal", "ArrayBuffer", "SharedArrayBuffer", "DataView", "Atomics", "WebAssembly",
                      "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
                      "Int32Array", "Uint32Array", "Float16Array", "Float32Array", "Float64Array",
                      "BigInt64Array", "BigUint64Array"]) {
    try { delete g[name]; } catch (_) { g[name] = undefined; }
  }
  g.setTimeout = refuse("setTimeout");
  g.clearTimeout = refuse("clearTimeout");
  const describe = (v) => {
    if (v === null) return "null";
    const kind = typeof v;
    if (kind === "undefined") return "undefined";
    if (kind === "string") return "a string " + json(v.length > 40 ? v.slice(0, 40) + "..." : v);
    if (kind === "object") return isArray(v) ? "an array" : "an object";
    return "a " + kind;
  };
  const errorText = (e) => {
    try {
      if (e instanceof Err) return str(e.name) + ": " + str(e.message);
      return "the value " + (typeof e === "string" ? json(e) : str(e));
    } catch (_) {
      return describe(e);
    }
  };
  let installed = false;
  define(g, "__numBestServersInstall", {value: function (fn) {
    if (installed) return "the text installs a second function";
    installed = true;
    if (typeof fn !== "function") return "the text evaluates to " + describe(fn) + ", not a function";
    define(g, "__numBestServers", {value: function (n, t) {
      let v;
      try { v = fn(n, t); } catch (e) { return "threw " + errorText(e); }
      if (typeof v === "number") return v;
      if (typeof v === "boolean") return v ? 1 : 0;
      return "returned " + describe(v) + ", not a number";
    }});
    return "";
  }});
})(globalThis);
"""
_OPEN = "__numBestServersInstall(("  # the text follows on the same line, then "\n))"


class BestServersError(ValueError):
    """The function text is refused, or a call failed; ``str()`` names the key, ``reason`` is the rest."""

    def __init__(self, reason: str):
        reason = re.sub(r"\s*[\r\n]+\s*", " ", reason)  # one line: a refusal is one line
        super().__init__(f"{KEY}: {reason}")
        self.reason = reason


def _new_racer() -> Any:
    """A fresh mini-racer context with its memory limit. mini-racer runs a context on the asyncio
    loop of the thread that makes it, if one runs; a timeout then cannot apply, so a thread with a
    running loop gets its context from a helper thread (which starts mini-racer's own loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        racer = MiniRacer()
    else:
        box: list[Any] = []
        helper = threading.Thread(target=lambda: box.append(MiniRacer()), name="bestservers-v8")
        helper.start()
        helper.join()
        racer = box[0]
    racer.set_hard_memory_limit(MEMORY_LIMIT_BYTES)
    return racer


def _js_error(exc: Exception, text_lines: int | None = None) -> str:
    """One line from a mini-racer error: ``<anonymous>:LINE: MESSAGE``, then the source line and a caret."""
    lines = str(exc).split("\n")
    m = re.match(r"<anonymous>:(\d+): (.*)", lines[0])
    if m is None:
        return lines[0][:300]
    line, message = int(m[1]), m[2][:300]
    if text_lines is None:
        return message
    if line > text_lines:
        return f"{message} at the end of the text"
    col = lines[2].find("^") if len(lines) > 2 else -1
    if col < 0:
        return f"{message} at line {line}"
    return f"{message} at line {line}, column {col + 1 - (len(_OPEN) if line == 1 else 0)}"


class _Engine:
    """One V8 context holding the installed function, owned by the process that made it."""

    def __init__(self, text: str, constants: Mapping[str, float]):
        self.pid = os.getpid()
        self.racer = _new_racer()
        _LIVE.add(self)
        timeout = COMPILE_TIMEOUT_MS / 1000
        try:
            self.racer.eval(_PRELUDE, timeout_sec=timeout)
            for name, value in constants.items():
                self.racer.eval(
                    f"Object.defineProperty(globalThis, {json.dumps(name)}, "
                    f"{{value: {json.dumps(float(value))}, enumerable: true}}); 0",
                    timeout_sec=timeout,
                )
            status = self.racer.eval(_OPEN + text + "\n))", timeout_sec=timeout)
        except JSTimeoutException:
            raise self.fail(f"evaluating the text took more than {COMPILE_TIMEOUT_MS} ms") from None
        except JSOOMException:
            raise self.fail(f"evaluating the text used more than {_MIB} of memory") from None
        except JSParseException as exc:
            raise self.fail(_js_error(exc, text.count("\n") + 1)) from None
        except JSEvalException as exc:
            raise self.fail("evaluating the text threw " + _js_error(exc, text.count("\n") + 1)) from None
        if status != "":
            raise self.fail(status if isinstance(status, str) and status else "the text is not one function expression")

    def fail(self, reason: str) -> BestServersError:
        if self.racer is not None:
            try:  # returns after V8 has reported the interrupted task, so closing leaves none behind
                self.racer.eval("0", timeout_sec=COMPILE_TIMEOUT_MS / 1000)
            except Exception:  # e.g. the memory limit, still reached
                pass
        self.close()
        return BestServersError(reason)

    def call(self, n: int, t: int) -> float | str:
        """``f(n, t)`` as a double, or why not (a message); raises on a timeout or the memory limit."""
        try:
            value = self.racer.eval(f"__numBestServers({n}, {t})", timeout_sec=CALL_TIMEOUT_MS / 1000)
        except JSTimeoutException:
            raise self.fail(f"f({n}, {t}) did not return within {CALL_TIMEOUT_MS} ms") from None
        except JSOOMException:
            raise self.fail(f"f({n}, {t}) used more than {_MIB} of memory") from None
        return value if isinstance(value, str) else float(value)

    def close(self) -> None:
        racer, self.racer = self.racer, None
        _LIVE.discard(self)
        if racer is not None and self.pid == os.getpid():
            racer.close()


class BestServersFunction:
    """A compiled ``numBestServersChoosingFunction``: ``f(n, t) -> float``, one V8 call per distinct pair.

    ``calls`` counts the V8 calls. Pickles as its text and constants (compiled again, or found in the
    cache, where it is loaded); copies are the object itself.
    """

    def __init__(self, text: str, constants: Mapping[str, float]):
        self.text = text
        self.constants = dict(constants)
        self.calls = 0
        self._results: dict[tuple[int, int], float] = {}
        self._errors: dict[tuple[int, int], BestServersError] = {}
        self._failure: BestServersError | None = None
        self._lock = threading.Lock()
        self._engine = _Engine(text, self.constants)

    def __call__(self, num_servers_in_tier: int, target_replicants: int) -> float:
        """``f(n, t)``: the JavaScript result as a double (NaN and +-Infinity possible).

        Raises:
            BestServersError: the call threw, returned a non-number, took more than
                ``CALL_TIMEOUT_MS`` ms or used more than ``MEMORY_LIMIT_BYTES`` bytes (after the last
                two every later call raises the same error).
        """
        pair = (int(num_servers_in_tier), int(target_replicants))
        with self._lock:
            value = self._results.get(pair)
            if value is not None:
                return value
            failure = self._errors.get(pair) or self._failure
            if failure is not None:
                raise failure
            if self._engine.pid != os.getpid():  # a forked child: the parent's V8 threads are not here
                self._engine = _Engine(self.text, self.constants)
            self.calls += 1
            try:
                value = self._engine.call(*pair)
            except BestServersError as exc:
                self._failure = exc
                _forget(self)
                raise
            if isinstance(value, str):
                self._errors[pair] = BestServersError(f"f({pair[0]}, {pair[1]}) {value}")
                raise self._errors[pair]
            self._results[pair] = value
            return value

    def close(self) -> None:
        """Free the V8 context now (a later call raises ``BestServersError``)."""
        with self._lock:
            self._failure = self._failure or BestServersError("the function was closed")
            self._engine.close()
        _forget(self)

    def __reduce__(self):
        return compile_function, (self.text, self.constants)

    def __copy__(self) -> BestServersFunction:
        return self

    def __deepcopy__(self, memo: dict) -> BestServersFunction:
        return self


_cache: OrderedDict[tuple[str, tuple[tuple[str, float], ...]], BestServersFunction] = OrderedDict()
_cache_pid = os.getpid()
_cache_lock = threading.Lock()
_LIVE: weakref.WeakSet[_Engine] = weakref.WeakSet()


def _forget(fn: BestServersFunction) -> None:
    with _cache_lock:
        for key, cached in list(_cache.items()):
            if cached is fn:
                del _cache[key]


@atexit.register
def _close_all() -> None:
    """Close this process's contexts before the interpreter finalizes: mini-racer's own cleanup at
    that point can wait forever on its V8 thread."""
    for engine in list(_LIVE):
        engine.close()


def compile_function(text: str, constants: Mapping[str, float] | None = None) -> BestServersFunction:
    """Compile ``numBestServersChoosingFunction`` (once per process and (text, constants)) and check ``f(1, 1)``.

    Args:
        text: JavaScript that evaluates to a function, e.g. ``function (numServersInTier,
            targetReplicants) { ... }``; the first parameter receives ``numServersInTier``.
        constants: read-only global numbers defined before the text is evaluated, e.g.
            ``{"numBestServersChoosingFunctionDefaultLogBase": 5.0}``.

    Returns:
        The compiled function (the same object for the same arguments within a process).

    Raises:
        BestServersError: the text is not a string or longer than ``MAX_TEXT_CHARS``, does not parse
            (with line and column), throws, takes more than ``COMPILE_TIMEOUT_MS`` ms or more than
            ``MEMORY_LIMIT_BYTES`` bytes, or does not evaluate to a function; or ``f(1, 1)`` fails
            as :meth:`BestServersFunction.__call__` says.

    Source: seed "Configurations"; ALGORITHM.md "Where a segment goes".
    """
    global _cache_pid
    if not isinstance(text, str):
        raise BestServersError(f"must be a string, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise BestServersError(f"the text is longer than {MAX_TEXT_CHARS} characters")
    constants = dict(constants or {})
    for name in constants:
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"constant name {name!r} is not a JavaScript identifier")
    key = (text, tuple(sorted((k, float(v)) for k, v in constants.items())))
    with _cache_lock:
        if _cache_pid != os.getpid():  # a forked child keeps nothing of its parent's contexts
            _cache.clear()
            _cache_pid = os.getpid()
        fn = _cache.get(key)
        if fn is not None:
            _cache.move_to_end(key)
            return fn
        fn = BestServersFunction(text, constants)
    try:
        fn(*PROBE)
    except BestServersError:
        fn.close()
        raise
    with _cache_lock:
        _cache[key] = fn
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return fn
