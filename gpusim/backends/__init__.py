"""Backends consume the IR: numpy (exact values), sim (discrete-event timing), triton (generated code, loaded lazily)."""
