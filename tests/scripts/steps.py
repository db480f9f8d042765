# steps.py FILE STEP...: open FILE for writing (created if missing, 0644)
# and run each STEP on the descriptor, printing "STEP ok" or "STEP
# <strerror>" per step, in order. STEP: write:N (N random bytes), fsync,
# close. An open that fails prints "open <strerror>" and ends the run (no
# descriptor to go on with). For the fault tests: what each call answered.
import os, sys

path, steps = sys.argv[1], sys.argv[2:]
try:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
except OSError as e:
    print("open", e.strerror)
    sys.exit(0)
for step in steps:
    name, _, arg = step.partition(":")
    try:
        if name == "write":
            os.write(fd, os.urandom(int(arg)))
        elif name == "fsync":
            os.fsync(fd)
        elif name == "close":
            os.close(fd)
        else:
            sys.exit(f"steps.py: unknown step {step}")
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, e.strerror, flush=True)
