import os

os.environ.setdefault("MPLBACKEND", "Agg")
# Tests simulate with the analytic register estimate unless they ask for compiled resources (a cold
# compile is ~2 s per distinct kernel; tests/toolchain/test_compile.py covers that path).
os.environ.setdefault("GPUSIM_RESOURCES", "estimated")
