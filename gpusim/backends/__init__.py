"""Backends consume the IR: numpy (exact values), sim (SimPy timing), triton (generated code, loaded lazily)."""
