"""
The inspector's charts as server-side SVG: no script, no CDN, nothing to vendor.

- `importance_timeline`: every journal entry, importance over time;
- `link_graph`: long-term memories and the A-MEM links between them;
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


def importance_timeline(points, width=720, height=220):
    """
    Args:
        points (list): `(datetime, importance 1-10, entry)` each, as `inspect.importance_points`.

    Returns:
        str: SVG; a dot per entry (colour: source type; red ring: marked wrong).
    """
    left, right, top, bottom = 36, 12, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
             'stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>']
    for level in (1, 5, 10):
        y = top + plot_h - (level - 1) / 9 * plot_h
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{level}</text>')
    if not points:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
                     'font-size="12">No journal entries yet.</text>')
        return _svg(width, height, "".join(parts), "Journal importance over time")
    start, end = points[0][0], points[-1][0]
    span = max((end - start).total_seconds(), 1.0)
    for moment, x, anchor in ((start, left, "start"), (end, left + plot_w, "end")):
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" font-size="10" text-anchor="{anchor}">'
                     f'{escape(moment.strftime("%Y-%m-%d %H:%M"))}</text>')
    for moment, importance, entry in points:
        x = left + (moment - start).total_seconds() / span * plot_w
        y = top + plot_h - (min(max(importance, 1), 10) - 1) / 9 * plot_h
        colour = SOURCE_COLOURS.get(entry.get("source_type"), "#555")
        ring = f' stroke="{WRONG_COLOUR}" stroke-width="2"' if entry.get("wrong") else ""
        tip = f"#{entry.get('id')} importance {importance:g}: {str(entry.get('content'))[:120]}"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}" '
                     f'fill-opacity="0.8"{ring} data-entry="{entry.get("id")}">'
                     f'{_title(tip)}</circle>')
    return _svg(width, height, "".join(parts), "Journal importance over time")


def link_graph(memories, width=480, height=480, most=60):
    """
    Args:
        memories (list[dict]): `inspect.long_term_memories` rows (`id`, `memory`, `links`).
        most (int): At most this many memories are drawn (the linked ones first).

    Returns:
        str: SVG; memories on a circle, a line per link (darker: more similar).
    """
    linked = {link.get("id") for memory in memories for link in memory.get("links") or ()}
    chosen = sorted(memories, key=lambda m: not (m.get("links") or m["id"] in linked))[:most]
    if not chosen:
        body = (f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="12">'
                "No long-term memories yet.</text>")
        return _svg(width, 40, body, "Links between long-term memories")
    cx, cy, radius = width / 2, height / 2, min(width, height) / 2 - 24
    where = {}
    for number, memory in enumerate(chosen):
        angle = 2 * math.pi * number / len(chosen) - math.pi / 2
        where[memory["id"]] = (cx + radius * math.cos(angle), cy + radius * math.sin(angle))
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
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{colour}" '
                     f'data-memory="{escape(memory["id"])}">'
                     f'{_title(str(memory.get("memory"))[:160])}</circle>')
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
