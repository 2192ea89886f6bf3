"""Scraping a Prometheus endpoint in tests: fetch it over HTTP and parse the exposition text with prometheus_client's
own parser (never regexes)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""(sample name, sorted label pairs) -> value."""


def parse_exposition(text: str) -> Samples:
    """Prometheus exposition text as {(sample name, sorted labels): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(url: str) -> Samples:
    """GET `url` (a `/metrics` endpoint) and parse it; the response must be 200 in the text format."""
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain"), response.headers
    return parse_exposition(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; KeyError naming what exists when it is absent."""
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        present = sorted(k for k in samples if k[0] == name)
        raise KeyError(f"no sample {key}; samples of {name}: {present}")
    return samples[key]


def labelled(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample of `name`, by its labels."""
    return {labels: v for (sample, labels), v in samples.items() if sample == name}
