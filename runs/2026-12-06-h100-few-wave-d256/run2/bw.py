import torch, json, statistics
x = torch.empty(2**30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
z = torch.empty(2**28, dtype=torch.float32, device="cuda")
out = {}
for name, fn, nbytes in (("copy", lambda: y.copy_(x), 2 * 2**30), ("read_sum", lambda: z.sum(), 4 * 2**28)):
    fn(); torch.cuda.synchronize(); ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
    us = statistics.median(ts); out[name] = {"us": us, "tbps": nbytes / us / 1e6}
print(json.dumps({"device": torch.cuda.get_device_name(), **out}))
