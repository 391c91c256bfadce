import gpusim

df = gpusim.sweep("scenarios/kernels/rmsnorm.py:rms_norm", gpu=["h100", "a100"],
                  rows=[1024, 4096], cols=4096, check=False)
print(df[["gpu", "rows", "time_us", "time_us_lo", "time_us_hi", "dram_gbps", "bound"]].to_string(index=False))
