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
