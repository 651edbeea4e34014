"""What fails across a sweep: counts, consensus, groups of like diagnoses, exemplars.

`summarize(records)` reads only the records (no model, no trace files) and gives, for each method
label and for the consensus of all of them:

- counts by category (from the categorise pass), by responsible agent, by the kind of the step
  named (action or observation: as the pass recorded it, else read from the trace) and by its
  position in the run;
- groups of diagnoses whose reasons say the same thing: TF-IDF over the category reason and the
  method's reasoning, reduced with a truncated SVD, then agglomerative clustering on cosine
  distance (average linkage, a fixed distance threshold). Above `DIRECT_LIMIT` diagnoses the
  points are first gathered into k-means micro-clusters (seeded) and those are clustered, so a
  10,000-record run stays in seconds. Everything is seeded: the same records give the same groups.
  Each group has its size, a label (its centroid's heaviest terms) and its three most typical
  diagnoses (closest to its centroid).

The consensus of a trace is the step most of its records name (ties: the earliest), with the
agent and category most of those records give.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from localfa.results import ResultRecord
from localfa.traces.model import normalize_agent

CONSENSUS = "consensus"
NO_CATEGORY = "(not categorised)"
DIRECT_LIMIT = 1500  # above this many diagnoses, cluster k-means micro-clusters instead of points
DISTANCE = 0.6  # cosine distance at which two groups stop merging
MIN_GROUP = 2
REASON_CHARS = 600
# Words every diagnosis uses: they would label every group alike.
DOMAIN_STOP_WORDS = frozenset({"step", "steps", "agent", "agents", "error", "errors", "decisive", "diagnosis", "run", "task"})
POSITIONS = ("first step", "early", "middle", "late", "last step")


@dataclass(frozen=True)
class Diagnosed:
    """One diagnosis as the summary sees it."""

    trace: str
    method: str
    seed: int
    step: int
    agent: str
    n_steps: int | None
    category: str | None
    reason: str
    step_kind: str

    @property
    def position(self) -> str:
        """Where in the run the named step sits (first, early, middle, late, last)."""
        n = self.n_steps or 0
        if n <= 1 or self.step <= 0:
            return POSITIONS[0]
        if self.step >= n - 1:
            return POSITIONS[4]
        share = self.step / (n - 1)
        return POSITIONS[1] if share < 1 / 3 else POSITIONS[2] if share < 2 / 3 else POSITIONS[3]


UNKNOWN_KIND = "unknown"


def step_kind(record: ResultRecord, kinds: Mapping[str, Sequence[str]] | None = None) -> str:
    """The kind (action, observation) of the step a record names: as the categorise pass recorded
    it, else from its trace's steps (`kinds`: trace id -> each step's kind), else unknown."""
    recorded = record.details.get("step_kind")
    if isinstance(recorded, str) and recorded:
        return recorded
    steps = (kinds or {}).get(record.trace)
    if steps is not None and record.step is not None and 0 <= record.step < len(steps):
        return steps[record.step]
    return UNKNOWN_KIND


def diagnosed(records: Iterable[ResultRecord], kinds: Mapping[str, Sequence[str]] | None = None) -> list[Diagnosed]:
    """The records that name a step, reduced to what the summary reads (`kinds`: see `step_kind`)."""
    out = []
    for r in records:
        if r.error or r.step is None:
            continue
        reason = " ".join(x for x in (r.category_reason or "", (r.reasoning or "")[:REASON_CHARS]) if x).strip()
        out.append(
            Diagnosed(
                trace=r.trace,
                method=r.method,
                seed=int(r.seed),
                step=int(r.step),
                agent=r.agent or "?",
                n_steps=r.n_steps,
                category=r.category,
                reason=reason,
                step_kind=step_kind(r, kinds),
            )
        )
    return out


def consensus(items: Sequence[Diagnosed]) -> list[Diagnosed]:
    """One diagnosis per trace: the step most records name, with their commonest agent and category."""
    by_trace: dict[str, list[Diagnosed]] = defaultdict(list)
    for d in items:
        by_trace[d.trace].append(d)
    out = []
    for trace, ds in sorted(by_trace.items()):
        steps = Counter(d.step for d in ds)
        step = min(steps, key=lambda s: (-steps[s], s))
        agreeing = [d for d in ds if d.step == step]
        agent = Counter(normalize_agent(d.agent) for d in agreeing).most_common(1)[0][0]
        shown_agent = next(d.agent for d in agreeing if normalize_agent(d.agent) == agent)
        cats = Counter(d.category for d in agreeing if d.category)
        category = min(cats, key=lambda c: (-cats[c], c)) if cats else None
        reasons = " ".join(d.reason for d in agreeing)[: REASON_CHARS * 2]
        kinds = Counter(d.step_kind for d in agreeing)
        out.append(Diagnosed(trace, CONSENSUS, 0, step, shown_agent, agreeing[0].n_steps, category, reasons, kinds.most_common(1)[0][0]))
    return out


@dataclass
class Counts:
    """Counts of one method's diagnoses along each axis."""

    method: str
    n: int
    by_category: Counter = field(default_factory=Counter)
    by_agent: Counter = field(default_factory=Counter)
    by_kind: Counter = field(default_factory=Counter)
    by_position: Counter = field(default_factory=Counter)

    def axes(self) -> dict[str, Counter]:
        return {"category": self.by_category, "agent": self.by_agent, "step_kind": self.by_kind, "position": self.by_position}


def count(method: str, items: Sequence[Diagnosed]) -> Counts:
    c = Counts(method, len(items))
    for d in items:
        c.by_category[d.category or NO_CATEGORY] += 1
        c.by_agent[d.agent] += 1
        c.by_kind[d.step_kind] += 1
        c.by_position[d.position] += 1
    return c


@dataclass
class Group:
    """Diagnoses whose reasons say the same thing."""

    gid: int
    label: str
    members: list[Diagnosed]
    exemplars: list[Diagnosed]

    @property
    def size(self) -> int:
        return len(self.members)

    def top_category(self) -> str | None:
        cats = Counter(d.category for d in self.members if d.category)
        return min(cats, key=lambda c: (-cats[c], c)) if cats else None


def _cluster_labels(matrix: "object", n: int) -> list[int]:
    """A group label per row of the (row-normalised) `matrix`; see the module doc."""
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering, MiniBatchKMeans

    x = np.asarray(matrix)
    if n < 2:
        return [0] * n
    if n <= DIRECT_LIMIT:
        model = AgglomerativeClustering(n_clusters=None, distance_threshold=DISTANCE, metric="cosine", linkage="average")
        return [int(v) for v in model.fit_predict(x)]
    k = min(300, max(2, n // 20))
    km = MiniBatchKMeans(n_clusters=k, random_state=0, n_init=3, batch_size=4096).fit(x)
    centres = km.cluster_centers_
    norms = np.linalg.norm(centres, axis=1, keepdims=True)
    centres = centres / np.where(norms == 0, 1, norms)
    used = sorted(set(int(v) for v in km.labels_))
    merge = AgglomerativeClustering(n_clusters=None, distance_threshold=DISTANCE, metric="cosine", linkage="average")
    top = merge.fit_predict(centres[used]) if len(used) > 1 else np.zeros(len(used), dtype=int)
    of_micro = {m: int(t) for m, t in zip(used, top)}
    return [of_micro[int(v)] for v in km.labels_]


def group_reasons(items: Sequence[Diagnosed], max_groups: int = 20) -> tuple[list[Group], int]:
    """(groups of at least `MIN_GROUP` diagnoses, largest first; how many diagnoses fell in no group)."""
    import numpy as np
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    texts = [d.reason or d.category or "" for d in items]
    if len([t for t in texts if t.strip()]) < MIN_GROUP:
        return [], len(items)
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    stop = sorted(ENGLISH_STOP_WORDS | DOMAIN_STOP_WORDS)
    vec = TfidfVectorizer(stop_words=stop, sublinear_tf=True, max_features=20000, token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
    try:
        tfidf = vec.fit_transform(texts)
    except ValueError:  # nothing but stop words
        return [], len(items)
    terms = vec.get_feature_names_out()
    dims = min(64, tfidf.shape[1] - 1)
    reduced = TruncatedSVD(n_components=dims, random_state=0).fit_transform(tfidf) if dims >= 2 else tfidf.toarray()
    reduced = normalize(reduced)
    # A reason with no counted word ("x", "Agent1") is a zero row: no cosine distance, so no group.
    worded = [i for i in range(len(items)) if np.abs(reduced[i]).sum() > 1e-9]
    labels = _cluster_labels(reduced[worded], len(worded))
    members: dict[int, list[int]] = defaultdict(list)
    for i, lab in zip(worded, labels):
        members[lab].append(i)
    big = sorted((ix for ix in members.values() if len(ix) >= MIN_GROUP), key=lambda ix: (-len(ix), ix[0]))
    ungrouped = len(items) - sum(len(ix) for ix in big)
    groups = []
    for gid, ix in enumerate(big[:max_groups]):
        centroid = np.asarray(tfidf[ix].mean(axis=0)).ravel()
        top_terms = [str(terms[j]) for j in np.argsort(-centroid)[:3] if centroid[j] > 0]
        centre = reduced[ix].mean(axis=0)
        closeness = reduced[ix] @ centre
        typical = [ix[j] for j in np.argsort(-closeness, kind="stable")]
        exemplars: list[Diagnosed] = []
        for j in typical:  # three distinct runs
            if all(items[j].trace != e.trace for e in exemplars):
                exemplars.append(items[j])
            if len(exemplars) == 3:
                break
        groups.append(Group(gid, " / ".join(top_terms) or "(no common words)", [items[j] for j in ix], exemplars))
    return groups, ungrouped


@dataclass
class Summary:
    """Everything `localfa summarize` prints and writes for one run."""

    counts: list[Counts]
    groups: list[Group]
    ungrouped: int
    records: int
    diagnosed: list[Diagnosed]
    taxonomies: list[str]


def summarize(records: Sequence[ResultRecord], max_groups: int = 20, kinds: Mapping[str, Sequence[str]] | None = None) -> Summary:
    """The summary of `records`; `kinds` (trace id -> its steps' kinds) gives the step kind of a
    record the categorise pass did not mark."""
    items = diagnosed(records, kinds)
    methods = list(dict.fromkeys(d.method for d in items))
    counts = [count(m, [d for d in items if d.method == m]) for m in methods]
    if len(methods) > 1:
        counts.append(count(CONSENSUS, consensus(items)))
    groups, ungrouped = group_reasons(items, max_groups)
    taxonomies = sorted({r.taxonomy for r in records if r.taxonomy})
    return Summary(counts, groups, ungrouped, len(records), items, taxonomies)
