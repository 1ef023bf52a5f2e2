"""The first chart without Plotly.js: a canvas preview drawn as soon as the data arrives, replaced in place.

Plotly.js is held back by routing its URL: the preview must draw the chart's data with the axes Plotly
will draw (same ranges, tick labels and plot box) and set the ``jp-first-chart`` mark; once the library
is let through, the Plotly chart takes the preview's place with the same data and no second request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image, ImageChops
from uitools import ARTIFACTS, DEMO, call, error_checked, plot_data, wait_chart, wait_for

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e
LOSS = '.chart[data-metric="loss"]'
PLOTLY = re.compile(r"/ui/vendor/plotly-[^/]*\.min\.js$")

_PREVIEW_JS = """s => {
    const c = document.querySelector(s + ' > canvas.chart-preview');
    return c && Number(c.dataset.points) > 0
        ? {points: Number(c.dataset.points), series: Number(c.dataset.series), axes: JSON.parse(c.dataset.axes),
           box: c.getBoundingClientRect().toJSON(), chart: c.parentElement.getBoundingClientRect().toJSON(),
           pixels: [c.width, c.height, c.clientWidth, c.clientHeight, devicePixelRatio]}
        : null;
}"""

_PLOTLY_AXES_JS = """s => {
    const fl = document.querySelector(s)._fullLayout;
    const ticks = (ax) => ax._vals.filter(v => !v.minor).map(v => v.text);
    return {x: {type: fl.xaxis.type, range: fl.xaxis.range.map(fl.xaxis.r2l), ticks: ticks(fl.xaxis)},
            y: {type: fl.yaxis.type, range: fl.yaxis.range.map(fl.yaxis.r2l), ticks: ticks(fl.yaxis)},
            plot: {l: fl._size.l, t: fl._size.t, w: fl._size.w, h: fl._size.h}};
}"""

# The loss chart's traces and layout framed by the preview's own code (frame.js) and laid out by Plotly in a
# chart of the same size, for many placings of the data: its start moved along the clock, its values scaled
# (labels of every width: "2", "20k", "−0.15", "2M") and its series renamed (legends of every width, on one row
# or two, with doubled spaces that Plotly keeps). Answers the cases whose margins, ranges or tick labels differ.
_FRAMES_JS = """async ([s, cases, start, step]) => {
    const gd = document.querySelector(s);
    const module = document.querySelector('script[type=module]').src.replace(/[^/]*$/, 'frame.js');
    const { fit, fontOf } = await import(module);
    const { width, height } = gd._fullLayout;
    const div = document.createElement('div');
    div.style.cssText = `position:absolute;left:0;top:0;width:${width}px;height:${height}px`;
    document.body.append(div);
    const ctx = document.createElement('canvas').getContext('2d');
    const scales = [1, 1000, 12000, 0.001, -3, 1e6, 0.37, 25, -0.02, 7e9];
    const first = Math.min(...gd.data.map(t => t.x[0]));
    const differing = [];
    for (let i = 0; i < cases; i++) {
        const shift = start + i * step - first;
        const scale = scales[Math.floor(i / 49) % scales.length];
        const suffixes = ['', ' (lr 3e-4,  warm-up)', ' k', '  ' + 'W'.repeat(i % 47)];
        const traces = gd.data.map(t => ({...t, name: t.name + suffixes[i % suffixes.length],
            x: Array.from(t.x, v => v + shift), y: Array.from(t.y, v => v == null ? v : v * scale)}));
        const layout = {...JSON.parse(JSON.stringify(gd.layout)), shapes: []};
        await Plotly.newPlot(div, traces, {...layout, width, height}, {staticPlot: true});
        const fl = div._fullLayout;
        const font = fontOf(layout.font);
        const g = fit(ctx, traces, layout, width, height, font, fontOf(layout.legend?.font, font));
        const plotly = {m: [fl._size.l, fl._size.r, fl._size.t, fl._size.b],
            x: fl.xaxis.range.map(fl.xaxis.r2l), y: fl.yaxis.range.map(fl.yaxis.r2l),
            xt: fl.xaxis._vals.filter(v => !v.minor).map(v => v.text),
            yt: fl.yaxis._vals.filter(v => !v.minor).map(v => v.text)};
        const mine = {m: [g.size.l, g.size.r, g.size.t, g.size.b], x: g.x.range, y: g.y.range,
            xt: g.x.ticks.map(t => t.text), yt: g.y.ticks.map(t => t.text)};
        const near = (a, b) => a.every((v, k) => Math.abs(v - b[k]) <= Math.abs(b[1] - b[0]) * 1e-6);
        const same = mine.m.join() === plotly.m.join() && near(mine.x, plotly.x) && near(mine.y, plotly.y)
            && mine.xt.join('|') === plotly.xt.join('|') && mine.yt.join('|') === plotly.yt.join('|');
        if (!same) differing.push({i, shift, scale, plotly, mine});
    }
    Plotly.purge(div);
    div.remove();
    return differing;
}"""

_MARKS_JS = """() => Object.fromEntries(['jp-first-chart', 'jp-chart-interactive'].map(
    n => [n, (performance.getEntriesByName(n)[0] || {}).startTime ?? null]))"""

# Pixels of the canvas near a colour (alpha above half), for telling which theme drew it.
_COLOUR_JS = """([s, rgb]) => {
    const c = document.querySelector(s + ' > canvas.chart-preview');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        const off = Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1]) + Math.abs(d[i + 2] - rgb[2]);
        if (d[i + 3] > 128 && off < 24) n++;
    }
    return n;
}"""

# Requests for the loss chart started between two times of the page's clock.
_ASKED_JS = """([t0, t1]) => performance.getEntriesByType('resource').filter(e =>
    e.name.includes('/scalars/chart') && e.name.includes('metric=loss') && e.startTime >= t0 && e.startTime <= t1
).length"""

MUTED_LIGHT = (0x6B, 0x72, 0x80)  # --muted, the tick labels' colour
MUTED_DARK = (0x8E, 0x96, 0xA4)
LINE = (0x3B, 0x82, 0xF6)  # the first series' colour


def assert_drawn_in(page: Any, colour: tuple[int, int, int], not_in: tuple[int, int, int]) -> None:
    """The preview's labels are in ``colour``; a few edge pixels of its anti-aliased text may come near the
    other theme's colour (a blend of one muted grey with the background can pass for the other), never more
    than a twentieth as many."""
    drawn = page.evaluate(_COLOUR_JS, [LOSS, list(colour)])
    other = page.evaluate(_COLOUR_JS, [LOSS, list(not_in)])
    assert drawn > 50 and other * 20 < drawn, (drawn, other)


class HeldPlotly:
    """Holds every request for Plotly.js until ``release``; later requests go through."""

    def __init__(self, page: Any) -> None:
        self.held: list[Any] = []
        self.released = False
        page.route(PLOTLY, self._route)

    def _route(self, route: Any) -> None:
        if self.released:
            route.continue_()
        else:
            self.held.append(route)

    def release(self) -> None:
        self.released = True
        for route in self.held:
            route.continue_()
        self.held.clear()


def wait_preview(page: Any, selector: str) -> dict:
    return page.wait_for_function(_PREVIEW_JS, arg=selector).json_value()


def wait_replaced(page: Any, selector: str) -> None:
    wait_chart(page, selector)
    page.wait_for_function("s => !document.querySelector(s + ' > canvas.chart-preview')", arg=selector)


def series_points(traces: list[dict]) -> int:
    """Points of the named series of a Plotly chart (not the band's edges or the raw line under smoothing)."""
    return sum(len(t["x"]) for t in traces if not re.search(r" (max|min|raw)$", t["name"]))


def assert_same_axes(preview: dict, plotly: dict) -> None:
    """The preview drew the axes Plotly drew: ranges, tick labels and the plot box."""
    for axis in ("x", "y"):
        lo, hi = plotly[axis]["range"]
        assert preview[axis]["range"] == pytest.approx([lo, hi], abs=(hi - lo) * 1e-6), axis
        assert preview[axis]["ticks"] == plotly[axis]["ticks"], axis
    assert preview["x"]["type"] == plotly["x"]["type"]
    assert preview["plot"] == plotly["plot"]


def card_shot(page: Any, selector: str, name: str) -> Image.Image:
    """A screenshot of the chart's card, saved under artifacts/ui."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(f"section.chart-card:has({selector})").screenshot(path=str(ARTIFACTS / name))
    return Image.open(ARTIFACTS / name).convert("RGB")


def share_differing(a: Image.Image, b: Image.Image) -> float:
    """The share of pixels two same-sized pictures differ in by more than a faint edge does."""
    assert a.size == b.size
    histogram = ImageChops.difference(a, b).convert("L").histogram()
    return sum(histogram[40:]) / sum(histogram)


def test_the_first_chart_draws_before_plotly_and_plotly_replaces_it_in_place(
    page: Any, ui_server: ServerProcess
) -> None:
    plotly = HeldPlotly(page)
    page.goto(f"/jobs/{DEMO}", wait_until="domcontentloaded")
    preview = wait_preview(page, LOSS)

    assert page.evaluate("typeof window.Plotly") == "undefined"
    marks = page.evaluate(_MARKS_JS)
    assert marks["jp-first-chart"] is not None and marks["jp-chart-interactive"] is None
    status, chart = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/scalars/chart?metric=loss&axis=iter&buckets=600")
    assert status == 200
    assert preview["series"] == len(chart["series"]) == 2  # train and val
    assert preview["points"] == sum(len(s["x_first"]) for s in chart["series"])
    assert preview["axes"]["x"]["type"] == "linear" and "1000" in preview["axes"]["x"]["ticks"]
    assert preview["box"] == preview["chart"]  # the preview fills the chart's own box
    assert preview["pixels"][:2] == [round(preview["pixels"][2]), round(preview["pixels"][3])]
    assert page.evaluate(_COLOUR_JS, [LOSS, list(LINE)]) > 200  # the mean line
    assert "points" in page.locator(f"section.chart-card:has({LOSS}) .meta").inner_text()
    card = page.locator(f"section.chart-card:has({LOSS})").bounding_box()
    before = card_shot(page, LOSS, "job-preview.png")

    released = page.evaluate("performance.now()")
    plotly.release()
    wait_replaced(page, LOSS)
    traces = plot_data(page, LOSS)
    assert series_points(traces) == preview["points"]
    assert {t["name"] for t in traces} >= {"train", "val", "train max", "train min"}
    assert_same_axes(preview["axes"], page.evaluate(_PLOTLY_AXES_JS, LOSS))
    assert page.locator(f"section.chart-card:has({LOSS})").bounding_box() == card  # no layout jump
    marks = page.evaluate(_MARKS_JS)
    assert marks["jp-chart-interactive"] >= marks["jp-first-chart"]
    asked = page.evaluate(_ASKED_JS, [released, marks["jp-chart-interactive"]])
    assert asked == 0  # Plotly drew the data the preview had: nothing was asked again
    page.mouse.move(0, 0)
    assert share_differing(before, card_shot(page, LOSS, "job-interactive.png")) < 0.01  # the same picture


@pytest.fixture
def dark_page(browser: Any, ui_server: ServerProcess, signed_in: dict) -> Iterator[Any]:
    """A signed-in page of a dark-themed browser at devicePixelRatio 2."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 800},
        device_scale_factor=2,
        storage_state=signed_in,
        base_url=ui_server.url,
        color_scheme="dark",
    )
    context.set_default_timeout(20_000)
    with error_checked(context.new_page()) as tab:
        yield tab
        context.close()


def test_the_preview_draws_a_time_axis_in_the_dark_theme_at_twice_the_pixels(dark_page: Any) -> None:
    page = dark_page
    plotly = HeldPlotly(page)
    page.goto(f"/jobs/{DEMO}?axis=time", wait_until="domcontentloaded")  # Plotly holds "load"
    preview = wait_preview(page, LOSS)
    width, height, css_width, css_height, ratio = preview["pixels"]
    assert ratio == 2 and (width, height) == (2 * css_width, 2 * css_height)
    x = preview["axes"]["x"]
    assert x["type"] == "date" and all(re.match(r"\d\d:\d\d|[A-Z][a-z]{2} \d", t) for t in x["ticks"])
    assert any("<br>" in t for t in x["ticks"])  # the date under the first time of the day
    assert_drawn_in(page, MUTED_DARK, not_in=MUTED_LIGHT)
    card_shot(page, LOSS, "job-preview-dark.png")

    page.locator("#theme-toggle").click()  # the preview follows the theme like the Plotly chart
    page.wait_for_function(_COLOUR_JS.replace("return n;", "return n > 50;"), arg=[LOSS, list(MUTED_LIGHT)])
    assert_drawn_in(page, MUTED_LIGHT, not_in=MUTED_DARK)
    preview = wait_preview(page, LOSS)
    before = card_shot(page, LOSS, "job-preview-time.png")

    plotly.release()
    wait_replaced(page, LOSS)
    assert_same_axes(preview["axes"], page.evaluate(_PLOTLY_AXES_JS, LOSS))
    assert series_points(plot_data(page, LOSS)) == preview["points"]
    page.mouse.move(0, 0)
    assert share_differing(before, card_shot(page, LOSS, "job-interactive-time.png")) < 0.01


def _edge_job(server: ServerProcess) -> str:
    """A job whose metrics are awkward to draw: NaN stretches and skipped steps, one point, a constant."""
    job = f"ui-edges-{int(time.time() * 1000)}"
    now = int(time.time() * 1000) - 3_600_000
    steps = [i for i in range(300) if not 120 <= i < 160]  # steps 120-159 were never logged
    values = ["NaN" if 200 <= i < 230 else round(1.5 + 0.5 * (-1) ** i * (i % 7) / 7 - i / 300, 4) for i in steps]
    single, flat = [42], list(range(100))
    series = [  # (metric, steps, values)
        ("gappy", steps, values),
        ("single", single, [0.5]),
        ("flat", flat, [5.0] * len(flat)),
    ]
    status, body = call(server, "POST", "/jp/v1/jobs", {"project": "demo", "job": job, "status": "running"})
    assert status in (200, 201), body
    status, body = call(
        server,
        "POST",
        "/jp/v1/ingest",
        {
            "project": "demo",
            "job": job,
            "series": [
                {
                    "kind": "scalar",
                    "metric": m,
                    "variant": "v",
                    "iter": x,
                    "ts": [now + 1000 * i for i in x],
                    "value": y,
                }
                for m, x, y in series
            ],
        },
    )
    assert status == 200, body

    def stored() -> bool:
        status, body = call(server, "GET", f"/jp/v1/jobs/{job}/scalars")
        return status == 200 and {m["metric"] for m in body["metrics"]} >= {"gappy", "single", "flat"}

    wait_for(stored, 60, "the edge-case metrics to be stored")
    return job


def test_the_preview_draws_gaps_a_single_point_and_a_constant_series_as_plotly_does(
    page: Any, ui_server: ServerProcess
) -> None:
    job = _edge_job(ui_server)
    plotly = HeldPlotly(page)
    page.goto(f"/jobs/{job}", wait_until="domcontentloaded")
    charts = {m: f'.chart[data-metric="{m}"]' for m in ("gappy", "single", "flat")}
    previews = {m: wait_preview(page, selector) for m, selector in charts.items()}
    assert page.evaluate("typeof window.Plotly") == "undefined"

    assert previews["gappy"]["points"] == 260  # a bucket per logged step, the NaN ones as gaps
    assert previews["single"]["points"] == 1
    assert previews["single"]["axes"]["y"]["range"] == pytest.approx([-0.5, 1.5])  # ±1 around the value
    assert previews["flat"]["axes"]["y"]["range"] == pytest.approx([4, 6])
    assert previews["flat"]["axes"]["y"]["ticks"][0] in ("4", "4.5")
    page.locator(charts["gappy"]).scroll_into_view_if_needed()
    card_shot(page, charts["gappy"], "job-preview-gaps.png")

    plotly.release()
    for metric, selector in charts.items():
        wait_replaced(page, selector)
        assert_same_axes(previews[metric]["axes"], page.evaluate(_PLOTLY_AXES_JS, selector))
        assert series_points(plot_data(page, selector)) == previews[metric]["points"], metric
    mean = next(t for t in plot_data(page, charts["gappy"]) if t["name"] == "v")
    assert sum(v is None for v in mean["y"]) == 30


# Where the data starts and how far it moves from one case to the next: on the time axis 49 moves cross
# one 30-minute tick step, so each of the ten value scales meets every position of the labels.
_PLACINGS = {"time": (1_767_571_207_000, 37_000), "iter": (0, 37)}


@pytest.mark.parametrize("axis", ["time", "iter"])
def test_the_preview_frames_a_chart_as_plotly_does_wherever_its_labels_fall(page: Any, axis: str) -> None:
    """The margins Plotly grows for labels near a chart's edge are whole pixels rounded from the labels'
    boxes, and a change of one pixel is not drawn again: the preview matches Plotly's layout for data placed
    at 490 positions, values and legends (a label box half a pixel off moved every point and tick of the
    chart by a pixel when its labels fell near a half pixel)."""
    page.goto(f"/jobs/{DEMO}?axis={axis}")
    wait_chart(page, LOSS)
    differing = page.evaluate(_FRAMES_JS, [LOSS, 490, *_PLACINGS[axis]])
    assert differing == [], f"{len(differing)} of 490 framed unlike Plotly, first: {differing[:2]}"
