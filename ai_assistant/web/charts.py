"""
The inspector's charts as server-side SVG: no script, no CDN, nothing to vendor.

- `importance_timeline`: the journal's entries per day (or per hour of one day), with their
  importance;
- `link_graph`: long-term memories and the A-MEM links between them, in clusters;
- `decay_curve`: a memory node's effective importance over patrol sessions, with the dying
  threshold, and where the node is now;
- `relationship_course`: favorability after each interaction, over the relationship bands.

Each returns SVG markup (a `str`); every text in it comes from the assistant's memory (player
words included), so every text is escaped here.
"""

import math
from html import escape

SOURCE_COLOURS = {"direct": "#1f77b4", "observation": "#2ca02c", "inference": "#9467bd",
                  "environmental": "#8c8c8c"}
WRONG_COLOUR = "#d62728"


def _svg(width, height, body, label):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="100%" role="img" aria-label="{escape(label)}" class="ai-chart">'
            f'<title>{escape(label)}</title>{body}</svg>')


def _title(text):
    return f"<title>{escape(str(text))}</title>"


def _bins(points, day):
    """`{bin key: [importances], ...}` by day, or by hour within `day`, oldest first."""
    bins = {}
    for moment, importance, entry in points:
        if day:
            if moment.date().isoformat() != day:
                continue
            key = moment.strftime("%H:00")
        else:
            key = moment.date().isoformat()
        bins.setdefault(key, []).append((importance, bool(entry.get("wrong"))))
    return dict(sorted(bins.items()))


def _shade(importance):
    """Light for unimportant, dark for important (importance 1-10)."""
    level = (min(max(importance, 1.0), 10.0) - 1) / 9
    return f"rgb({int(198 - 167 * level)},{int(219 - 100 * level)},{int(239 - 59 * level)})"


def importance_timeline(points, day="", width=720, height=200):
    """
    Args:
        points (list): `(datetime, importance 1-10, entry)` each, as `inspect.importance_points`.
        day (str): `YYYY-MM-DD` to zoom into that day (a bar per hour); empty: a bar per day.

    Returns:
        str: SVG; a bar per day (or hour): its height the number of entries, its shade their
        mean importance, a red cap for those marked wrong; each day links to its zoom.
    """
    label = f"Journal entries on {day}, by hour" if day else "Journal entries by day"
    bins = _bins(points, day)
    left, right, top, bottom = 36, 12, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
             'stroke="#999"/>']
    if not bins:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
                     'font-size="12">No journal entries yet.</text>')
        return _svg(width, height, "".join(parts), label)
    most = max(len(values) for values in bins.values())
    parts.append(f'<text x="{left - 6}" y="{top + 8}" font-size="10" text-anchor="end">'
                 f"{most}</text>")
    slot = min(plot_w / len(bins), 48.0)  # a few days stay bars, not a wall
    for number, (key, values) in enumerate(bins.items()):
        mean = sum(value for value, _ in values) / len(values)
        wrong = sum(1 for _, is_wrong in values if is_wrong)
        bar = max(1.0, len(values) / most * plot_h)
        x, y = left + number * slot, top + plot_h - bar
        tip = (f"{key}: {len(values)} entr{'y' if len(values) == 1 else 'ies'}, mean importance "
               f"{mean:.1f}" + (f", {wrong} marked wrong" if wrong else ""))
        rect = (f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" '
                f'height="{bar:.1f}" fill="{_shade(mean)}">{_title(tip)}</rect>')
        if wrong:
            cap = max(1.0, wrong / most * plot_h)
            rect += (f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" '
                     f'height="{cap:.1f}" fill="{WRONG_COLOUR}"/>')
        if not day:
            rect = f'<a href="?day={escape(key)}#journal" class="ai-day">{rect}</a>'
        parts.append(rect)
        if len(bins) <= 16 or number % max(1, len(bins) // 8) == 0:
            parts.append(f'<text x="{x + slot / 2:.1f}" y="{height - 24}" font-size="9" '
                         f'text-anchor="middle">{escape(key[5:] if not day else key)}</text>')
    parts.append(f'<text x="{left}" y="{height - 6}" font-size="10">'
                 f"{escape(next(iter(bins)))} to {escape(list(bins)[-1])}"
                 f"{'' if day else '; click a day to zoom in'}</text>")
    return _svg(width, height, "".join(parts), label)


def _clusters(chosen):
    """The memories as groups of linked ones (connected components), biggest first."""
    parent = {memory["id"]: memory["id"] for memory in chosen}

    def root(node):
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for memory in chosen:
        for link in memory.get("links") or ():
            if link.get("id") in parent:
                parent[root(link["id"])] = root(memory["id"])
    groups = {}
    for memory in chosen:
        groups.setdefault(root(memory["id"]), []).append(memory)
    return sorted(groups.values(), key=len, reverse=True)


def _cluster_layout(groups, width):
    """Each group on its own small circle, the circles in rows: `{id: (x, y)}`, height."""
    where, x, y, row_height = {}, 0.0, 0.0, 0.0
    for group in groups:
        radius = 0.0 if len(group) == 1 else max(28.0, 11.0 * len(group) / math.pi)
        size = 2 * radius + 110
        if x + size > width and x > 0:
            x, y, row_height = 0.0, y + row_height, 0.0
        cx, cy = x + size / 2, y + radius + 24
        for number, memory in enumerate(group):
            angle = 2 * math.pi * number / len(group) - math.pi / 2
            where[memory["id"]] = (cx + radius * math.cos(angle), cy + radius * math.sin(angle))
        x, row_height = x + size, max(row_height, 2 * radius + 48)
    return where, y + row_height


def link_graph(memories, width=720, most=40):
    """
    Args:
        memories (list[dict]): `inspect.long_term_memories` rows (`id`, `memory`, `links`).
        most (int): At most this many memories are drawn (the linked ones first).

    Returns:
        str: SVG; linked memories grouped in clusters, each labelled with its words and a link
        to it in the list (`?memory=<id>`), a line per link (darker: more similar).
    """
    linked = {link.get("id") for memory in memories for link in memory.get("links") or ()}
    chosen = [m for m in memories if m.get("links") or m["id"] in linked][:most]
    if not chosen:
        body = (f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="12">'
                "No links between long-term memories yet.</text>")
        return _svg(width, 40, body, "Links between long-term memories")
    where, height = _cluster_layout(_clusters(chosen), width)
    parts = []
    for memory in chosen:
        for link in memory.get("links") or ():
            if link.get("id") not in where:
                continue
            (x1, y1), (x2, y2) = where[memory["id"]], where[link["id"]]
            opacity = min(1.0, max(0.15, float(link.get("score") or 0.0)))
            parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                         f'stroke="#1f77b4" stroke-opacity="{opacity:.2f}" stroke-width="1.5">'
                         f'{_title(f"similarity {float(link.get("score") or 0):.2f}")}</line>')
    for memory in chosen:
        x, y = where[memory["id"]]
        colour = WRONG_COLOUR if memory.get("wrong") else "#ff7f0e"
        words = str(memory.get("memory") or "")
        short = words if len(words) <= 18 else words[:17] + "…"
        parts.append(f'<a href="?memory={escape(memory["id"])}#memories" class="ai-graph-node">'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{colour}" '
                     f'data-memory="{escape(memory["id"])}">{_title(words[:160])}</circle>'
                     f'<text x="{x:.1f}" y="{y + 16:.1f}" font-size="9" text-anchor="middle">'
                     f"{escape(short)}</text></a>")
    return _svg(width, height, "".join(parts), "Links between long-term memories")


def decay_curve(node, decay_sessions, threshold, width=160, height=44):
    """
    Args:
        node (dict): An `inspect.memory_nodes` row (`importance`, `session_count`,
            `reactivation_count`).
        decay_sessions (float): The decay constant.
        threshold (float): The dying threshold.

    Returns:
        str: SVG; the node's effective importance from session 0 on, a dot where it is now.
    """
    importance = float(node.get("importance") or 0.0)
    sessions = int(node.get("session_count") or 0)
    held = int(node.get("reactivation_count") or 0)
    horizon = max(sessions + 10, int(decay_sessions * 3))
    top = max(importance, threshold, 0.01)

    def point(session):
        value = importance * math.exp(-(session - held) / decay_sessions)
        value = min(value, top)
        return (session / horizon * (width - 4) + 2, height - 2 - value / top * (height - 4))

    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(point, range(0, horizon + 1)))
    now_x, now_y = point(sessions)
    cut_y = height - 2 - threshold / top * (height - 4)
    body = (f'<line x1="0" y1="{cut_y:.1f}" x2="{width}" y2="{cut_y:.1f}" stroke="{WRONG_COLOUR}"'
            f' stroke-dasharray="3,2"/><polyline points="{line}" fill="none" stroke="#555"/>'
            f'<circle cx="{now_x:.1f}" cy="{now_y:.1f}" r="3" fill="#1f77b4"/>')
    return _svg(width, height, body,
                f"Decay of node {node.get('id')}: session {sessions}, "
                f"effective importance {node.get('effective_importance')}")


def relationship_course(course, bands, width=240, height=60):
    """
    Args:
        course (list[dict]): `{"time", "favorability", "state"}` each, oldest first.
        bands (list): `(band, lowest favorability)`, lowest first.

    Returns:
        str: SVG; the favorability after each interaction, the band limits dashed.
    """
    def y_of(value):
        return height - 4 - float(value) * (height - 8)

    parts = []
    for name, floor in bands[1:]:
        y = y_of(floor)
        parts.append(f'<line x1="0" y1="{y:.1f}" x2="{width}" y2="{y:.1f}" stroke="#bbb" '
                     f'stroke-dasharray="2,2"/><text x="{width - 2}" y="{y - 2:.1f}" '
                     f'font-size="8" text-anchor="end" fill="#777">{escape(name)}</text>')
    if course:
        step = (width - 8) / max(len(course) - 1, 1)
        points = [(4 + number * step, y_of(point["favorability"]))
                  for number, point in enumerate(course)]
        parts.append('<polyline fill="none" stroke="#2ca02c" stroke-width="1.5" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>')
        for (x, y), point in zip(points, course, strict=True):
            tip = f"{point['time']}: {point['favorability']:.2f} ({point['state']})"
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="#2ca02c">'
                         f"{_title(tip)}</circle>")
    return _svg(width, height, "".join(parts), "Favorability after each interaction")
