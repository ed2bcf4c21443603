"""Server-rendered SVG of a workflow's DAG (nodes in columns by depth, edges from dependency to node;
within a column, nodes in the order that crosses the fewest edges found).

It takes plain tuples rather than a validated workflow so that the editor can preview a DAG that
still has errors (unknown dependencies are drawn as missing, cycles do not loop forever).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 44, 60, 18, 10
# The height of one lane of the loops that draw the edges closing a cycle, under the boxes.
LOOP_LANE = 22


@dataclass(frozen=True)
class DagNode:
    name: str
    label: str
    depend_on: tuple[str, ...] = ()
    background: bool = False
    # The nodes that run the model server this node's unit names (``server:``): the node starts once
    # they are up, as after a dependency (drawn dashed: "served by").
    served_by: tuple[str, ...] = ()

    @property
    def after(self) -> tuple[str, ...]:
        """Every node this one starts after: its dependencies, then its model servers."""
        return self.depend_on + tuple(s for s in self.served_by if s not in self.depend_on)


def nodes_of_spec(spec: Mapping[str, Any]) -> list[DagNode]:
    """Return the DAG nodes of a native spec mapping (valid or not)."""
    nodes = spec.get("workflows") or {}
    bodies = {
        str(name): body if isinstance(body, Mapping) else {}
        for name, body in (nodes.items() if isinstance(nodes, Mapping) else [])
    }
    runs: dict[str, list[str]] = {}
    for name, body in bodies.items():
        runs.setdefault(str(body.get("uses", name)), []).append(name)
    out = []
    for name, body in bodies.items():
        unit = spec.get(body.get("uses", name))
        unit = unit if isinstance(unit, Mapping) else {}
        server = unit.get("server")
        deps = body.get("depend_on") or []
        out.append(
            DagNode(
                name,
                str(unit.get("type", "?")),
                tuple(str(d) for d in deps if isinstance(d, str)),
                bool(body.get("background")),
                tuple(n for n in runs.get(server, ()) if n != name) if isinstance(server, str) else (),
            )
        )
    return out


def _depths(nodes: Sequence[DagNode]) -> dict[str, int]:
    """Return each node's column: the length of its longest dependency chain (iterative, so a long
    chain cannot exhaust the stack). Nodes on or after a cycle go right of what they depend on."""
    known = {n.name: n for n in nodes}
    deps = {n.name: [d for d in dict.fromkeys(n.after) if d in known and d != n.name] for n in nodes}
    dependents: dict[str, list[str]] = {name: [] for name in known}
    waiting = {name: len(ds) for name, ds in deps.items()}
    for name, ds in deps.items():
        for d in ds:
            dependents[d].append(name)
    depth: dict[str, int] = {}
    ready = deque(name for name, count in waiting.items() if count == 0)
    while ready:
        name = ready.popleft()
        depth[name] = 1 + max((depth[d] for d in deps[name]), default=-1)
        for child in dependents[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    for name in known:  # left over: a cycle, or downstream of one
        if name not in depth:
            depth[name] = 1 + max((depth[d] for d in deps[name] if d in depth), default=-1)
    return depth


def _cycle_nodes(nodes: Sequence[DagNode]) -> set[str]:
    """Return the names of the nodes that lie on a dependency cycle (each reaches itself)."""
    known = {n.name for n in nodes}
    deps = {n.name: [d for d in n.after if d in known] for n in nodes}
    out = set()
    for start in deps:
        seen: set[str] = set()
        todo = list(deps[start])
        while todo:
            name = todo.pop()
            if name == start:
                out.add(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(deps[name])
    return out


def crossings(columns: Mapping[int, Sequence[str]], edges: Sequence[tuple[str, str]]) -> int:
    """Return how many pairs of edges between adjacent columns cross, with the nodes in these rows."""
    col = {name: c for c, names in columns.items() for name in names}
    row = {name: r for names in columns.values() for r, name in enumerate(names)}
    adjacent = [(a, b) for a, b in edges if a in col and b in col and col[b] == col[a] + 1]
    return sum(
        1
        for i, (a1, b1) in enumerate(adjacent)
        for a2, b2 in adjacent[i + 1 :]
        if col[a1] == col[a2] and (row[a1] - row[a2]) * (row[b1] - row[b2]) < 0
    )


def _ordered(columns: dict[int, list[str]], edges: Sequence[tuple[str, str]]) -> dict[int, list[str]]:
    """Return the columns with their nodes reordered to cross fewer edges (the barycenter heuristic:
    a node goes by the mean row of its neighbours in the column swept from, left to right then right
    to left, twice); the file's order is kept when reordering crosses no fewer edges, and for ties."""
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for a, b in edges:
        parents.setdefault(b, []).append(a)
        children.setdefault(a, []).append(b)
    cols = {c: list(names) for c, names in columns.items()}
    keys = sorted(cols)

    def barycenter(index: int, neighbours: list[str], rows: Mapping[str, int]) -> tuple[float, int]:
        near = [rows[m] for m in neighbours if m in rows]
        return (sum(near) / len(near) if near else float(index), index)

    def sweep(order: Sequence[int], neighbours: Mapping[str, list[str]], step: int) -> None:
        for c in order:
            rows = {name: r for r, name in enumerate(cols.get(c - step, []))}
            keyed = sorted((barycenter(i, neighbours.get(n, []), rows), n) for i, n in enumerate(cols[c]))
            cols[c] = [name for _, name in keyed]

    for _ in range(2):
        sweep(keys[1:], parents, 1)
        sweep(keys[-2::-1], children, -1)
    return cols if crossings(cols, edges) < crossings(columns, edges) else columns


def dag_svg(nodes: Sequence[DagNode]) -> str:
    """Return an SVG (as text, escaped) drawing the DAG; background nodes have a dashed border."""
    if not nodes:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40" role="img">'
            '<text x="10" y="25">no nodes</text></svg>'
        )
    depth = _depths(nodes)
    columns: dict[int, list[str]] = {}
    for n in nodes:
        columns.setdefault(depth[n.name], []).append(n.name)
    known = {n.name for n in nodes}
    columns = _ordered(columns, [(dep, n.name) for n in nodes for dep in n.after if dep in known])
    pos = {}
    for col, names in columns.items():
        for row, name in enumerate(names):
            pos[name] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    # An edge that does not go rightwards closes a cycle: it is drawn as a loop under the boxes (one
    # lane each), so that both directions of a cycle show and no edge runs through a box.
    back = [(dep, n.name) for n in nodes for dep in n.after if dep in pos and depth[dep] >= depth[n.name]]
    width = PAD * 2 + (max(columns) + 1) * (BOX_W + GAP_X) - GAP_X
    boxes_bottom = PAD + max(len(v) for v in columns.values()) * (BOX_H + GAP_Y) - GAP_Y
    height = boxes_bottom + PAD + len(back) * LOOP_LANE
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="workflow DAG">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
    ]
    lane = 0
    for n in nodes:
        x2, y2 = pos[n.name]
        for dep in n.after:
            if dep not in pos:
                continue
            x1, y1 = pos[dep]
            served = dep in n.served_by and dep not in n.depend_on
            relation = "is served by" if served else "depends on"
            if (dep, n.name) in back:
                lane += 1
                low = boxes_bottom + lane * LOOP_LANE
                sx, ex = x1 + BOX_W * 2 / 3, x2 + BOX_W / 3
                parts.append(
                    f'<path class="edge back" d="M {sx} {y1 + BOX_H} C {sx} {low}, {ex} {low}, '
                    f'{ex} {y2 + BOX_H}" fill="none" marker-end="url(#arrow)">'
                    f"<title>{escape(n.name)} {relation} {escape(dep)} (closes a cycle)</title></path>"
                )
                continue
            sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2
            if depth[n.name] - depth[dep] > 1:
                # Over columns in between: along the gap under the source's row, so that the edge runs
                # through no box (straight, it would pass behind a box and read as that box's edge).
                lane_y = y1 + BOX_H + GAP_Y / 2
                route = (
                    f"M {sx} {sy} C {sx + GAP_X / 2} {sy}, {sx + GAP_X / 2} {lane_y}, {sx + GAP_X} {lane_y} "
                    f"L {ex - GAP_X} {lane_y} C {ex - GAP_X / 2} {lane_y}, {ex - GAP_X / 2} {ey}, {ex} {ey}"
                )
            else:
                route = f"M {sx} {sy} C {sx + GAP_X / 2} {sy}, {ex - GAP_X / 2} {ey}, {ex} {ey}"
            parts.append(
                f'<path class="edge{" serves" if served else ""}" d="{route}" fill="none" '
                f'marker-end="url(#arrow)"><title>{escape(n.name)} {relation} {escape(dep)}</title></path>'
            )
    in_cycle = _cycle_nodes(nodes)
    for n in nodes:
        x, y = pos[n.name]
        missing = [d for d in n.depend_on if d not in pos]
        cls = ("node background" if n.background else "node") + (
            " invalid" if missing or n.name in in_cycle else ""
        )
        dash = ' stroke-dasharray="5 3"' if n.background else ""
        title = f"{n.name} ({n.label})" + (f"; unknown dependencies: {', '.join(missing)}" if missing else "")
        parts.append(
            f'<g class="{cls}" data-node="{escape(n.name)}">'
            f"<title>{escape(title)}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"{dash}/>'
            f'<text x="{x + 8}" y="{y + 18}" class="name">{escape(n.name[:20])}</text>'
            f'<text x="{x + 8}" y="{y + 35}" class="type">{escape(n.label[:22])}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
