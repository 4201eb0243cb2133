#!/usr/bin/env python3
"""Draws the main panels of the kubeplex Grafana dashboard from samples of a real operator's /metrics.

The picture in docs/observability/dashboard.png shows what a failing cluster looks like: the example operator
(`fleet demo`: three local real clusters, two AppDeployments) while cluster-b's API server is frozen, and
then while cluster-b answers but refuses the operator's writes. It is committed; this script is run by hand, not in CI. Needs Python 3.9+ and matplotlib
(`pip install matplotlib`); `record` and `scenario` need only the standard library.

Re-draw the picture from the committed samples of the run it shows (samples.jsonl.gz beside this script):

    python3 crates/kubeplex-bench/dashboard/render_dashboard.py render \
        crates/kubeplex-bench/dashboard/samples.jsonl.gz --out docs/observability/dashboard.png

Record a new run (from the repository's root; about 5 minutes once the demo is built):

    cargo build -p kubeplex-fleet                 # so that the demo starts at once below
    python3 crates/kubeplex-bench/dashboard/render_dashboard.py scenario --out /tmp/kubeplex-samples.jsonl
    python3 crates/kubeplex-bench/dashboard/render_dashboard.py render /tmp/kubeplex-samples.jsonl \
        --out docs/observability/dashboard.png
    gzip -9 -c /tmp/kubeplex-samples.jsonl > crates/kubeplex-bench/dashboard/samples.jsonl.gz

`scenario` does, in order:
  1. starts `cargo run -q -p kubeplex-fleet -- demo` (its own process group) and waits for its table; it
     reads the probe address from the line `Operator started: ... (http://127.0.0.1:PORT/startupz)` and the
     kubeconfig from the line `Try: KUBECONFIG=... kubectl ...`;
  2. scrapes http://127.0.0.1:PORT/metrics every second into the JSONL file, with a `mark` line per step:
       t=15 s   kubectl patch AppDeployment crd-a: replicas 3     (reconciles while all is well)
       t=30 s   SIGSTOP to cluster-b's kube-apiserver             (frozen: connections open, no answers)
       t=45 s   kubectl patch AppDeployment crd-a: replicas 4     (cluster-b cannot be written)
       t=60 s   kubectl delete AppDeployment crd-b --wait=false   (its children in cluster-b hold it)
       t=120 s  SIGCONT to cluster-b's kube-apiserver             (thawed)
       t=165 s  kubectl apply, in cluster-b, a ValidatingAdmissionPolicy (+ binding) that denies every
                Deployment write                                  (cluster-b answers, and refuses)
       t=170 s  kubectl patch AppDeployment crd-a: replicas 5     (its apply fails in cluster-b only)
       t=215 s  kubectl delete that policy and binding            (cluster-b accepts writes again)
       t=220 s  kubectl patch AppDeployment crd-a: replicas 6
       t=260 s  stop: SIGINT to the demo, which stops the operator and the clusters.
     cluster-b's kube-apiserver is found as the process, descended from the demo, whose command line has
     `--secure-port=P`, P being the port of cluster-b's server in the demo's kubeconfig.

By hand instead (any operator, any failure):

    cargo run -p kubeplex-fleet -- demo           # terminal 1; prints `Metrics: http://...` and KUBECONFIG
    python3 crates/kubeplex-bench/dashboard/render_dashboard.py record --url http://127.0.0.1:PORT/metrics \
        --seconds 180 --out /tmp/kubeplex-samples.jsonl            # terminal 2
    kill -STOP <pid of cluster-b's kube-apiserver>; ...; kill -CONT <pid>   # terminal 3, meanwhile
    python3 crates/kubeplex-bench/dashboard/render_dashboard.py render /tmp/kubeplex-samples.jsonl --out dashboard.png

JSONL: one object per line, {"t": unix seconds, "samples": [[name, {label: value}, value], ...]} per scrape
(only kubeplex's metrics: controller_runtime_*, workqueue_*, kubeplex_*), or {"t": ..., "mark": "text"}.

Rates and quantiles are computed as Prometheus' rate() and histogram_quantile() would over a sliding window
(--window, 15 s): a counter's series that first appears at value v is taken to have been 0 before (the
runtime creates a labelled series on its first increment).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections import defaultdict

PREFIXES = ("controller_runtime_", "workqueue_", "kubeplex_")
STATE_COLORS = {1: "#37872d", 0: "#c4162a"}

# ---------------------------------------------------------------------------------------------- scraping

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def parse_text(text: str) -> list:
    """The samples of an OpenMetrics (or Prometheus) text exposition: [name, labels, value]."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError(f"cannot parse {line!r}")
        name, _, body, value, _ = match.groups()
        if not name.startswith(PREFIXES):
            continue
        labels = {}
        position = 0
        body = body or ""
        while position < len(body):
            label = _LABEL.match(body, position)
            if not label:
                raise ValueError(f"cannot parse the labels of {line!r}")
            labels[label.group(1)] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1),
                                            label.group(2))
            position = label.end()
        samples.append([name, labels, float(value)])
    return samples


def scrape(url: str) -> list:
    with urllib.request.urlopen(url, timeout=5) as response:
        return parse_text(response.read().decode("utf-8"))


class Recorder:
    """Scrapes `url` once a second into `path`; `mark` adds a line that the picture shows as a step."""

    def __init__(self, url: str, path: str):
        self.url = url
        self.file = open(path, "w", encoding="utf-8")
        self.start = time.time()

    def mark(self, text: str) -> None:
        print(f"[{time.time() - self.start:6.1f} s] {text}", flush=True)
        self.file.write(json.dumps({"t": time.time(), "mark": text}) + "\n")
        self.file.flush()

    def until(self, seconds_since_start: float) -> None:
        """Scrapes every second until that many seconds after the start."""
        while True:
            now = time.time()
            if now - self.start >= seconds_since_start:
                return
            try:
                samples = scrape(self.url)
            except Exception as error:  # a scrape that fails is a gap, as in Prometheus
                print(f"scrape failed: {error}", file=sys.stderr)
            else:
                self.file.write(json.dumps({"t": now, "samples": samples}) + "\n")
                self.file.flush()
            time.sleep(max(0.0, 1.0 - (time.time() - now)))

    def close(self) -> None:
        self.file.close()


def record(args) -> None:
    recorder = Recorder(args.url, args.out)
    try:
        recorder.until(args.seconds)
    except KeyboardInterrupt:
        pass
    recorder.close()


# ---------------------------------------------------------------------------------------------- scenario


def _descendants(root: int) -> set:
    children = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children[ppid].append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _apiserver_pid(demo: subprocess.Popen, kubeconfig: str, cluster: str) -> int:
    server = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "config", "view", "-o",
         f'jsonpath={{.clusters[?(@.name=="{cluster}")].cluster.server}}'],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    port = server.rsplit(":", 1)[1]
    for pid in _descendants(demo.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"kube-apiserver") and f"--secure-port={port}".encode() in argv:
            return pid
    raise RuntimeError(f"no kube-apiserver with --secure-port={port} under the demo (pid {demo.pid})")


# Denies every Deployment write in the cluster it is applied to: a cluster that answers, and refuses.
REJECT_DEPLOYMENTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: scenario-rejects-deployments}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
    - {expression: "false", message: "the scenario refuses Deployment writes in this cluster"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: scenario-rejects-deployments}
spec:
  policyName: scenario-rejects-deployments
  validationActions: [Deny]
"""


def scenario(args) -> None:
    demo = subprocess.Popen(
        ["cargo", "run", "-q", "-p", "kubeplex-fleet", "--", "demo"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        url = kubeconfig = None
        deadline = time.time() + args.start_timeout
        for line in demo.stdout:
            print(f"demo: {line}", end="", flush=True)
            started = re.search(r"\(http://([0-9.:]+)/startupz\)", line)
            if started:
                url = f"http://{started.group(1)}/metrics"
            tried = re.match(r"Try: KUBECONFIG=(\S+) kubectl", line)
            if tried:
                kubeconfig = tried.group(1)
                break
            if time.time() > deadline:
                raise RuntimeError("the demo did not print its table in time")
        if not (url and kubeconfig):
            raise RuntimeError("the demo ended before printing its table")

        def kubectl(*words: str, context: str = "control", stdin: str | None = None) -> None:
            namespace = ["-n", "crds"] if context == "control" else []
            subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--context", context, *namespace, *words],
                           check=True, stdout=subprocess.DEVNULL, input=stdin, text=True)

        def replicas(count: int) -> None:
            kubectl("patch", "appdeployment", "crd-a", "--type=merge", "-p", f'{{"spec":{{"replicas":{count}}}}}')
            recorder.mark(f"crd-a: replicas {count}")

        frozen = _apiserver_pid(demo, kubeconfig, "cluster-b")
        recorder = Recorder(url, args.out)
        recorder.mark(f"recording {url}")
        recorder.until(15)
        replicas(3)
        recorder.until(30)
        os.kill(frozen, signal.SIGSTOP)
        recorder.mark("cluster-b frozen")
        try:
            recorder.until(45)
            replicas(4)
            recorder.until(60)
            kubectl("delete", "appdeployment", "crd-b", "--wait=false")
            recorder.mark("crd-b deleted")
            recorder.until(120)
        finally:
            os.kill(frozen, signal.SIGCONT)
        recorder.mark("cluster-b thawed")
        recorder.until(165)
        kubectl("apply", "-f", "-", cluster="cluster-b", stdin=REJECT_DEPLOYMENTS)
        recorder.mark("cluster-b refuses Deployment writes")
        try:
            recorder.until(170)
            replicas(5)
            recorder.until(215)
        finally:
            kubectl("delete", "-f", "-", cluster="cluster-b", stdin=REJECT_DEPLOYMENTS)
        recorder.mark("cluster-b accepts them again")
        recorder.until(220)
        replicas(6)
        recorder.until(260)
        recorder.close()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------- queries


class Samples:
    def __init__(self, path: str):
        self.times, self.scrapes, self.marks = [], [], []
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as file:
            for line in file:
                entry = json.loads(line)
                if "mark" in entry:
                    self.marks.append((entry["t"], entry["mark"]))
                else:
                    self.times.append(entry["t"])
                    self.scrapes.append(entry["samples"])
        if not self.times:
            raise SystemExit(f"{path}: no scrapes")
        self.t0 = self.times[0]
        self.names = {s[0] for scrape in self.scrapes for s in scrape}

    def x(self) -> list:
        return [t - self.t0 for t in self.times]

    def series(self, name: str, where=None) -> dict:
        """{frozenset(labels): [value or None per scrape]} of one metric."""
        out = defaultdict(lambda: [None] * len(self.times))
        for i, scrape in enumerate(self.scrapes):
            for sample_name, labels, value in scrape:
                if sample_name == name and (where is None or where(labels)):
                    out[frozenset(labels.items())][i] = value
        return out

    @staticmethod
    def _group(key: frozenset, by: tuple) -> tuple:
        labels = dict(key)
        return tuple(labels.get(label, "") for label in by)

    def gauge(self, name: str, by: tuple, agg=sum, where=None) -> dict:
        """agg by (labels) (name): {group: [value or None]}."""
        grouped = defaultdict(lambda: [[] for _ in self.times])
        for key, values in self.series(name, where).items():
            for i, value in enumerate(values):
                if value is not None:
                    grouped[self._group(key, by)][i].append(value)
        return {g: [agg(v) if v else None for v in vs] for g, vs in grouped.items()}

    def increases(self, name: str, window: float, where=None) -> dict:
        """{labels: [increase over the window, per scrape]}; resets handled, absence before the first
        sample read as 0."""
        out = {}
        for key, values in self.series(name, where).items():
            # Cumulative with resets removed.
            total, previous, running = [], None, 0.0
            for value in values:
                if value is None:
                    total.append(None if previous is None else running)
                    continue
                if previous is None:
                    running = value
                elif value >= previous:
                    running += value - previous
                else:
                    running += value
                previous = value
                total.append(running)
            filled = [0.0 if v is None else v for v in total]
            increase = []
            start = 0
            for i, t in enumerate(self.times):
                while self.times[start] < t - window:
                    start += 1
                increase.append(filled[i] - filled[start] if i > start else None)
            out[key] = increase
        return out

    def rate(self, name: str, by: tuple, window: float, where=None) -> dict:
        """sum by (labels) (rate(name[window])) per second."""
        grouped = defaultdict(lambda: [None] * len(self.times))
        for key, increase in self.increases(name, window, where).items():
            group = grouped[self._group(key, by)]
            for i, value in enumerate(increase):
                if value is not None:
                    group[i] = (group[i] or 0.0) + value / window
        return dict(grouped)

    def quantile(self, q: float, name: str, by: tuple, window: float) -> dict:
        """histogram_quantile(q, sum by (labels, le) (rate(name_bucket[window])))."""
        buckets = defaultdict(lambda: defaultdict(lambda: [0.0] * len(self.times)))
        for key, increase in self.increases(name + "_bucket", window).items():
            le = float(dict(key)["le"].replace("+Inf", "inf"))
            row = buckets[self._group(key, by)][le]
            for i, value in enumerate(increase):
                row[i] += value or 0.0
        out = {}
        for group, by_le in buckets.items():
            bounds = sorted(by_le)
            values = []
            for i in range(len(self.times)):
                counts = [by_le[b][i] for b in bounds]
                values.append(_bucket_quantile(q, bounds, counts))
            out[group] = values
        return out


def _bucket_quantile(q: float, bounds: list, counts: list):
    """Prometheus' histogram_quantile over cumulative bucket counts."""
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    for i, (bound, count) in enumerate(zip(bounds, counts)):
        if count >= rank:
            if math.isinf(bound):
                return bounds[i - 1] if i > 0 else None
            lower = bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
    return None


# ---------------------------------------------------------------------------------------------- render

# One colour per context, as Grafana would keep them across panels.
CONTEXT_COLORS = {"control": "#1f60c4", "cluster-a": "#37872d", "cluster-b": "#c4162a"}
EXTRA_COLORS = ["#8f3bb8", "#e0752d", "#6e6e6e", "#0a8f8f", "#b8860b"]


def _color(name: str, used: dict) -> str:
    for context, color in CONTEXT_COLORS.items():
        if name.startswith(context):
            return color
    return used.setdefault(name, EXTRA_COLORS[len(used) % len(EXTRA_COLORS)])


def render(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = Samples(args.samples)
    x = s.x()
    w = args.window
    extra = {}

    def line(ax, series: dict, label, style=None) -> None:
        for group, values in sorted(series.items()):
            name = label(group)
            dashes = next((d for end, d in (style or {}).items() if name.endswith(end)), "-")
            ax.plot(x, [math.nan if v is None else v for v in values], dashes,
                    color=_color(name, extra), label=name, linewidth=1.6)

    plt.rcParams["axes.titlepad"] = 12  # room for the step numbers above each panel
    fig, axes = plt.subplots(3, 3, figsize=(18, 12), dpi=100)
    fig.suptitle(
        "kubeplex dashboard, fleet demo: cluster-b frozen (crd-b deleted meanwhile), then refusing writes "
        f"(scraped every second; rates and quantiles over {w:g} s)", fontsize=14)

    # Context up, as a state timeline.
    ax = axes[0][0]
    up = s.gauge("kubeplex_cluster_up", ("cluster",), agg=max)
    contexts = sorted(up, key=lambda g: list(CONTEXT_COLORS).index(g[0]) if g[0] in CONTEXT_COLORS else 99)
    for row, group in enumerate(reversed(contexts)):
        values = up[group]
        start = 0
        for i in range(1, len(values) + 1):
            if i == len(values) or values[i] != values[start]:
                if values[start] is not None:
                    end = x[i] if i < len(values) else x[-1]
                    ax.broken_barh([(x[start], end - x[start])], (row - 0.38, 0.76),
                                   color=STATE_COLORS[int(values[start])])
                    if end - x[start] > 12:
                        ax.text((x[start] + end) / 2, row, "up" if values[start] else "down",
                                ha="center", va="center", color="white", fontsize=10, fontweight="bold")
                start = i
    ax.set_yticks(range(len(contexts)), [g[0] for g in reversed(contexts)])
    ax.set_title("Context up  (kubeplex_cluster_up)")

    # Errors by context, per minute (the dashboard's increase(...[1m])).
    ax = axes[0][1]
    per_minute = lambda series: {g: [None if v is None else v * 60 for v in vs] for g, vs in series.items()}
    line(ax, per_minute(s.rate("kubeplex_cluster_healthchecks_total", ("cluster",), 60,
                               where=lambda l: l["result"] == "failure")),
         lambda g: f"{g[0]} failed pings", style={"pings": "-"})
    line(ax, per_minute(s.rate("kubeplex_children_applied_total", ("cluster", "result"), 60,
                               where=lambda l: l["result"] in ("error", "conflict"))),
         lambda g: f"{g[0]} child apply {g[1]}", style={"apply error": "--", "apply conflict": "-."})
    line(ax, per_minute(s.rate("kubeplex_watch_restarts_total", ("cluster",), 60,
                               where=lambda l: l["reason"] != "expired")),
         lambda g: f"{g[0]} watch failures", style={"failures": ":"})
    ax.set_title("Errors by context  (per minute)")

    line(axes[0][2], s.gauge("kubeplex_parent_deletion_blocked", ("controller", "cluster")),
         lambda g: f"{g[0]} waits on {g[1]}")
    axes[0][2].set_title("Blocked deletions  (kubeplex_parent_deletion_blocked)")

    line(axes[1][0], s.rate("kubeplex_children_applied_total", ("cluster", "result"), w),
         lambda g: f"{g[0]} {g[1]}", style={"success": "-", "error": "--", "conflict": ":"})
    axes[1][0].set_title("Child applies by context  (/s)")

    errors = s.rate("controller_runtime_reconcile_errors_total", ("cluster",), w)
    line(axes[1][1], s.rate("controller_runtime_reconcile_total", ("cluster", "result"), w),
         lambda g: f"{g[0]} {g[1]}", style={"success": "-", "error": "--", "requeue": ":"})
    axes[1][1].set_title("Reconcile rate by context  (/s)" + ("" if errors else ": no reconcile failed"))

    ax = axes[1][2]
    for q, style in ((0.5, "-"), (0.99, "--")):
        series = s.quantile(q, "controller_runtime_reconcile_time_seconds", ("cluster",), w)
        line(ax, {(g[0], f"p{q * 100:g}"): v for g, v in series.items()}, lambda g: f"{g[0]} {g[1]}",
             style={"p50": "-", "p99": "--"})
    ax.set_title("Reconcile latency p50 / p99  (s)")

    line(axes[2][0], s.quantile(0.99, "kubeplex_cluster_ping_seconds", ("cluster",), w),
         lambda g: f"{g[0]} p99")
    axes[2][0].set_title("Ping latency p99  (s, answered pings)")

    line(axes[2][1], s.gauge("kubeplex_cache_objects", ("cluster", "kind")), lambda g: f"{g[0]} {g[1]}")
    axes[2][1].set_title("Cache objects per context and kind")

    line(axes[2][2], s.gauge("workqueue_depth", ("controller",)), lambda g: f"{g[0]} waiting")
    line(axes[2][2], s.gauge("controller_runtime_active_workers", ("controller",)), lambda g: f"{g[0]} running")
    axes[2][2].set_title("Queue depth")

    marks = [(t - s.t0, text) for t, text in s.marks if not text.startswith("recording")]
    steps = "   ".join(f"[{n}] {t:.0f} s: {text}" for n, (t, text) in enumerate(marks, 1))
    fig.text(0.5, 0.952, textwrap.fill(steps, 190, break_long_words=False), ha="center", va="top", fontsize=10,
             color="#333333")
    freeze = next((t for t, text in marks if "frozen" in text), None)
    thaw = next((t for t, text in marks if "thawed" in text), None)
    refuse = next((t for t, text in marks if "refuses" in text), None)
    accept = next((t for t, text in marks if "accepts" in text), None)
    for row in axes:
        for ax in row:
            ax.set_xlim(x[0], x[-1])
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("seconds since the recording started", fontsize=8)
            if freeze is not None:
                ax.axvspan(freeze, thaw if thaw is not None else x[-1], color="#fbe3e5", zorder=0)
            if refuse is not None:
                ax.axvspan(refuse, accept if accept is not None else x[-1], color="#fdeed6", zorder=0)
            for n, (t, _) in enumerate(marks, 1):
                ax.axvline(t, color="#555555", linestyle=":", linewidth=0.9)
                ax.annotate(str(n), xy=(t, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                            textcoords="offset points", fontsize=7, ha="center", va="bottom", color="#555555")
            if ax is not axes[0][0]:
                ax.set_ylim(bottom=0)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=8, loc="upper left")
                else:
                    ax.text(0.5, 0.5, "no series: nothing counted", transform=ax.transAxes, ha="center",
                            color="#888888")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    # A palette of 256 colours (the panels use a dozen) makes the file a quarter of the size.
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB")
    image.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(args.out, optimize=True)
    print(f"wrote {args.out} from {len(s.times)} scrapes over {x[-1]:.0f} s")
    missing = sorted(n for n in USED if n not in s.names)
    if missing:
        print("never scraped (renamed, or not implemented yet?): " + ", ".join(missing))


USED = [
    "kubeplex_cluster_up", "kubeplex_parent_deletion_blocked", "kubeplex_children_applied_total",
    "kubeplex_cluster_healthchecks_total", "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_time_seconds_bucket", "kubeplex_cluster_ping_seconds_bucket",
    "kubeplex_cache_objects", "workqueue_depth", "controller_runtime_active_workers",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("record", help="scrape a /metrics URL every second into a JSONL file")
    p.add_argument("--url", required=True)
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--out", required=True)
    p.set_defaults(run=record)
    p = commands.add_parser("scenario", help="run `fleet demo`, freeze cluster-b, record (see the top)")
    p.add_argument("--out", required=True)
    p.add_argument("--start-timeout", type=float, default=600, help="seconds for the demo to print its table")
    p.set_defaults(run=scenario)
    p = commands.add_parser("render", help="draw the panels from a JSONL file into a PNG")
    p.add_argument("samples")
    p.add_argument("--out", default="dashboard.png")
    p.add_argument("--window", type=float, default=15, help="seconds, for rates and quantiles")
    p.set_defaults(run=render)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
