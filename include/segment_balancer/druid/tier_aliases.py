"""Historical tier aliases (Druid 38.0.0 dynamic config ``historicalTierAliases``, PRs #19204 and
#19595; ALGORITHM.md "Rules of Druid 38: tier aliases and partial loads").

An alias stands for several physical tiers: ``{"hot": ["hot_blue", "hot_green"]}``. A load rule's
``tieredReplicants`` entry ``{alias: n}`` asks ``n`` replicas on *every* tier of the alias (the count
is not divided among them); a tier the rule names itself keeps its own count; the alias is no tier
and is dropped (``StrategicSegmentAssigner.expandWithAliases``). Druid refuses a config in which an
alias is also listed as a physical tier of an alias, or a tier belongs to two aliases
(``CoordinatorDynamicConfig``'s constructor).

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

KEY = "historicalTierAliases"
"""The dynamic config key."""

TierAliases = dict[str, tuple[str, ...]]
"""alias -> its physical tiers, in the order given (duplicates removed, as Druid's ``Set``)."""


def parse_aliases(value: Any) -> TierAliases:
    """``historicalTierAliases`` as Druid 38.0.0 accepts it: a JSON object of arrays of tier names
    (``None``: no aliases).

    Raises:
        ValueError: not an object of arrays of non-empty strings; an alias listed as a physical
            tier; a tier under two aliases. The message names the key and what was expected.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(tiers, list) and all(isinstance(t, str) and t for t in tiers) for tiers in value.values()
    ):
        raise ValueError(f"{KEY}: expected an object of arrays of tier names, got {json.dumps(value)[:200]}")
    aliases = {str(alias): tuple(dict.fromkeys(tiers)) for alias, tiers in value.items()}
    seen: dict[str, str] = {}
    for alias, tiers in aliases.items():
        both = sorted(set(tiers) & set(aliases))
        if both:
            raise ValueError(
                f"{KEY}: {', '.join(both)} is an alias and cannot also be a physical tier of alias {alias!r}"
            )
        twice = [t for t in tiers if t in seen]
        if twice:
            raise ValueError(
                f"{KEY}: tier(s) {', '.join(twice)} cannot belong to both alias {seen[twice[0]]!r} and alias {alias!r}"
            )
        seen.update(dict.fromkeys(tiers, alias))
    return aliases


def expand(tiered_replicants: Mapping[str, int], aliases: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    """``tiered_replicants`` (tier or alias -> replicas) with every alias replaced by its tiers, each
    asked the alias's count; a tier named in its own right keeps its own count. Without aliases,
    the map as it is. Order: the rule's, an alias's tiers in its place."""
    if not aliases or not any(name in aliases for name in tiered_replicants):
        return dict(tiered_replicants)
    out: dict[str, int] = {}
    for name, count in tiered_replicants.items():
        if name in aliases:
            for tier in aliases[name]:
                if tier not in tiered_replicants:
                    out.setdefault(tier, count)
        else:
            out[name] = count
    return out


def tier_to_alias(aliases: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """physical tier -> the alias it belongs to (each tier belongs to at most one)."""
    return {tier: alias for alias, tiers in aliases.items() for tier in tiers}


def expand_rules(rules: Mapping[str, list], aliases: Mapping[str, tuple[str, ...]]) -> dict[str, list]:
    """Every rule of ``rules`` (datasource -> ``druid.rules.Rule`` list) with its ``tiered_replicants``
    expanded (:func:`expand`): what the #7458 planner reads, before anything else (ALGORITHM.md
    "Rules of Druid 38"). The same rule objects where nothing expands."""
    if not aliases:
        return dict(rules)
    out: dict[str, list] = {}
    for datasource, lst in rules.items():
        out[datasource] = [
            dataclasses.replace(rule, tiered_replicants=expand(rule.tiered_replicants, aliases))
            if any(name in aliases for name in rule.tiered_replicants)
            else rule
            for rule in lst
        ]
    return out
