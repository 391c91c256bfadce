"""gpusim.output.style: axis scales and tick labels, label placement, titles."""
from gpusim.output import style


def test_powers_of_two_get_a_log2_axis_with_exponent_labels():
    fig = style.figure(4, 3)
    ax = fig.add_subplot()
    xs = [1 << 16, 1 << 18, 1 << 20]
    ax.plot(xs, [1, 2, 3])
    style.set_x_axis(ax, xs, categorical=False)
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["$2^{16}$", "$2^{18}$", "$2^{20}$"]


def test_categories_get_one_tick_each():
    fig = style.figure(4, 3)
    ax = fig.add_subplot()
    style.set_x_axis(ax, ["a100", "h100"], categorical=True)
    assert list(ax.get_xticks()) == [0, 1] and [t.get_text() for t in ax.get_xticklabels()] == ["a100", "h100"]


def test_overlapping_labels_move_or_drop():
    fig = style.figure(4, 3)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    texts = [ax.annotate("a long label", (5, 5), xytext=(8, 6), textcoords="offset points") for _ in range(3)]
    dropped = style.drop_overlapping_labels(fig, texts, [(8, 6), (8, -6)], ax)
    assert dropped == 1                       # two places, three labels
    kept = [t for t in texts if t.figure is not None]
    assert sorted(t.xyann for t in kept) == [(8, -6), (8, 6)]


def test_titles_and_wrap():
    fig = style.figure(4, 3)
    ax = fig.add_subplot()
    style.titles(ax, "Main", "sub one\nsub two")
    assert ax.get_title() == "sub one\nsub two"
    assert any(t.get_text() == "Main" for t in ax.texts)
    assert style.wrap("word " * 40, 30).count("\n") >= 5 and style.wrap("") == ""


def test_narrow_log_range_keeps_tick_labels_apart():
    fig = style.figure(9, 5.4)
    ax = fig.add_subplot()
    ax.plot([1, 2], [34.1e6, 36.3e6])
    style.set_log_y(ax, "B")
    fig.canvas.draw()
    labels = [t.label1.get_text() for t in ax.yaxis.get_minor_ticks() + ax.yaxis.get_major_ticks()
              if ax.get_ylim()[0] <= t.get_loc() <= ax.get_ylim()[1]]
    assert len(labels) >= 3 and len(set(labels)) == len(labels)
    assert "34.5 MB" in labels


def test_wide_log_range_keeps_whole_units():
    fig = style.figure(9, 5.4)
    ax = fig.add_subplot()
    ax.plot([1, 2], [1e3, 1e9])
    style.set_log_y(ax, "B")
    fig.canvas.draw()
    labels = {t.label1.get_text() for t in ax.yaxis.get_major_ticks()}
    assert {"1 kB", "1 MB", "1 GB"} <= labels
