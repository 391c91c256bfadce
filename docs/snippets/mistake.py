# Mistakes fail when the kernel is traced, naming the file and line (docs/snippets/mine.py:8).
from gpusim import simulate

r = simulate("docs/snippets/mine.py:relu")
print(r.status, "|", r.reason)
