import os, signal, subprocess, sys, resource, time, json
# SIGINT at its default for pytest (a background shell job inherits it ignored)
signal.signal(signal.SIGINT, signal.SIG_DFL)
which = sys.argv[1]
root = f"/tmp/s4h/{which}"
tmp = f"/tmp/s4h/{which}-tmp"
os.makedirs(tmp, exist_ok=True)
env = dict(os.environ, PYTHONPATH=root, TMPDIR=tmp, XDG_CACHE_HOME=f"{tmp}/xdg")
env.pop("PTXGEN_CACHE_DIR", None)
t = time.time()
with open(f"/tmp/s4h/{which}.log", "w") as log:
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "not slow", "--durations=0", "-p", "no:randomly", "-p", "no:cacheprovider"],
                         cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": rc, "wall": time.time() - t, "user": ru.ru_utime, "sys": ru.ru_stime}, open(f"/tmp/s4h/{which}.json", "w"))
