"""Fold run.sh hostprof's cuda-gdb samples (every thread's stack, taken
repeatedly from a running decode loop) into where the host's time goes.

    python hostprof.py MLXGO_SAMPLES.txt MLXLM_SAMPLES.txt

For each file: the threads that were running MLX code (a frame in libmlx or
the shim) and, over those, the functions on top of the stack (self) and
anywhere on it (inclusive), as a share of the samples. Waiting threads (futex,
condition variables, poll, sleep) are counted apart, not as work.
"""

import collections
import re
import sys

FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-fA-F]+ in )?(.+?)(?: \(.*)?$")
WAIT = re.compile(r"futex|pthread_cond_(timed)?wait|__GI___poll|epoll_wait|nanosleep|clock_nanosleep|sem_wait|"
                  r"__lll_lock_wait|runtime\.futex|runtime\.usleep|select|do_futex_wait|sched_yield|"
                  r"__GI___libc_read|std::condition_variable::wait")


def short(name: str) -> str:
    name = re.sub(r"<[^<>]*(<[^<>]*>[^<>]*)*>", "<>", name)  # templates, two levels
    name = re.sub(r"\[abi:\w+\]", "", name)
    return name[:140]


def parse(path: str):
    samples = open(path, errors="replace").read().split("@@sample")[1:]
    stacks = []  # per sample, per thread: list of (function, line)
    for s in samples:
        threads = []
        cur = None
        for line in s.splitlines():
            if line.startswith("Thread "):
                cur = []
                threads.append(cur)
            elif line.startswith("#") and cur is not None:
                m = FRAME.match(line)
                if m:
                    cur.append((short(m.group(2)), line))
        stacks.append(threads)
    return stacks


def report(path: str) -> None:
    stacks = parse(path)
    n = len(stacks)
    busy_self, busy_incl, waits = collections.Counter(), collections.Counter(), collections.Counter()
    busy_threads = 0
    for threads in stacks:
        for t in threads:
            if not t:
                continue
            mlx = any(("libmlx" in l or "mlx::" in f or "mlxgo_" in f) for f, l in t)
            if not mlx:
                continue
            top = t[0][0]
            if WAIT.search(top) or (len(t) > 1 and WAIT.search(t[1][0]) and "syscall" in top):
                # a thread parked inside MLX: name the MLX function it waits in
                inner = next((f for f, l in t if "mlx" in f or "libmlx" in l), top)
                waits[inner] += 1
                continue
            busy_threads += 1
            busy_self[top] += 1
            for f in dict.fromkeys(f for f, _ in t):
                busy_incl[f] += 1
    print(f"== {path}: {n} samples; threads running MLX code in them: {busy_threads} (mean {busy_threads / max(n, 1):.2f})")
    print("-- on top of a running MLX thread's stack (self), share of samples:")
    for f, c in busy_self.most_common(25):
        print(f"  {c / n:6.1%}  {f}")
    print("-- anywhere on a running MLX thread's stack (inclusive):")
    for f, c in busy_incl.most_common(45):
        print(f"  {c / n:6.1%}  {f}")
    print("-- MLX threads found waiting, in:")
    for f, c in waits.most_common(12):
        print(f"  {c / n:6.1%}  {f}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        report(p)
