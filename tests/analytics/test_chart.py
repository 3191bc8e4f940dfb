"""The charts' geometry: bars and lines inside the viewBox, a round top value."""

from __future__ import annotations

from tools_app.analytics.chart import HEIGHT, WIDTH, bar_chart, line_chart, nice_top


def test_it_rounds_the_top_up_to_a_readable_number():
    assert [nice_top(v) for v in (0, 1, 3, 7, 12, 180, 0.03)] == [1, 1, 5, 10, 20, 200, 0.05]


def test_it_draws_bars_inside_the_box_with_their_errors_at_the_foot():
    chart = bar_chart([0, 5, 10], [0, 1, 10])
    assert chart.top == 10
    assert [b.height for b in chart.bars] == [0, HEIGHT / 2, HEIGHT]
    full = chart.bars[2]
    assert full.y == 0 and full.error_y == 0 and full.error_height == HEIGHT
    assert chart.bars[1].error_height == HEIGHT / 10
    assert all(b.x >= 0 and b.x + b.width <= WIDTH for b in chart.bars)


def test_it_breaks_the_line_where_a_step_has_no_value():
    chart = line_chart([1.0, 2.0, None, 4.0, None, 3.0, 3.5])
    assert chart.top == 5
    assert len(chart.lines) == 2  # [1, 2] and [3, 3.5]
    assert len(chart.dots) == 1  # 4.0 stands alone
    for points in chart.lines:
        for pair in points.split():
            x, y = map(float, pair.split(","))
            assert 0 <= x <= WIDTH and 0 <= y <= HEIGHT


def test_it_draws_nothing_for_no_values():
    assert line_chart([None, None]).lines == [] and bar_chart([], []).bars == []
