import gpusim

r = gpusim.simulate("attention_flash", gpu="h100", batch=4, heads=16, seq_len=4096, head_dim=64)
print(r.summary())                     # time, interval, DRAM bytes, TFLOP/s, bound, per-launch breakdown
print(r.kernels[0].dram_read_bytes / 1e6, "MB read from DRAM by the first launch")   # per-launch counters
