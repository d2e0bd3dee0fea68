#!/usr/bin/env python3
"""Before/after: time two splitpkg binaries on the same real inputs, interleaved (A, B, A, B, …) so
machine noise hits both alike; report medians, spread and the ratio B/A. For refactors that must
not cost speed (issue 13): `bench/ab.py OLD_BIN NEW_BIN [--runs N]`.

Inputs come from fixtures/corpus/fetch (torch 2.11 wheel and its unpacked tree). Outputs go to
/dev/null or a scratch directory (`--scratch`, e.g. /dev/shm to take the disk's write-back out of
commands that write a gigabyte); each command runs once per binary to warm the page cache first.
Besides wall time it reports each binary's CPU time (user + sys of the child, median): when wall
times differ and CPU times do not, the difference is waiting (disk, other load), not the code.
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def corpus():
    out = subprocess.run([os.path.join(ROOT, "fixtures/corpus/fetch"), "--unpack", "torch-2.11.0-cu130"],
                         check=True, capture_output=True, text=True).stdout
    f = dict(line.split(None, 2)[0::2] for line in out.splitlines() if line.strip())
    return f["wheel"], f["tree"]


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    c, t = cpu(), time.perf_counter()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - t, cpu() - c, rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a"); ap.add_argument("b")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--scratch", help="directory for the outputs (default: the system's temp dir)")
    args = ap.parse_args()
    wheel, tree = corpus()
    scratch = tempfile.mkdtemp(prefix="splitpkg-ab-", dir=args.scratch)
    cases = [
        ("plan tree", ["plan", "-q", tree]),
        ("plan --json tree", ["plan", "-q", "--json", tree]),
        ("inspect --json tree", ["inspect", "-q", "--json", tree]),
        ("plan --deep tree", ["plan", "-q", "--deep", tree]),
        ("fatbin lib/", ["fatbin", "-q", os.path.join(tree, "lib")]),
        ("plan .whl", ["plan", "-q", wheel]),
        ("wheel .whl", ["wheel", "-q", wheel, "--out", os.path.join(scratch, "wheels")]),
        ("report (4 documents)", ["report", "-q"] + [a for k in ("plan", "smoke", "fatbin", "pack")
                                  for a in (f"--{k}", os.path.join(ROOT, "docs/evidence/report-inputs", f"{k}.json"))]
         + ["--out", os.path.join(scratch, "report.html")]),
        ("pack tree", ["pack", "-q", tree, "--version", "2.11.0", "--out", os.path.join(scratch, "channel")]),
    ]
    cases = [c for c in cases if not args.only or args.only in c[0]]
    print(f"A = {args.a}\nB = {args.b}\nruns = {args.runs} each, interleaved\n")
    print("| command | A median | A min–max | B median | B min–max | B/A | CPU A | CPU B | CPU B/A |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for name, cmd in cases:
        slow = "whl" in name or name.startswith("pack")
        runs = max(3, args.runs // 3) if slow else args.runs
        ta, tb, ca, cb = [], [], [], []
        for binary in (args.a, args.b):
            run([binary] + cmd)
        for _ in range(runs):
            for binary, acc, cacc in ((args.a, ta, ca), (args.b, tb, cb)):
                t, c, rc = run([binary] + cmd)
                if rc not in (0, 1):
                    sys.exit(f"{binary} {' '.join(cmd)}: exit {rc}")
                acc.append(t)
                cacc.append(c)
        ma, mb = statistics.median(ta), statistics.median(tb)
        mca, mcb = statistics.median(ca), statistics.median(cb)
        ms = lambda v: f"{v * 1e3:.0f} ms"
        print(f"| `{name}` | {ms(ma)} | {ms(min(ta))}–{ms(max(ta))} | {ms(mb)} | {ms(min(tb))}–{ms(max(tb))} "
              f"| {mb / ma:.2f} | {ms(mca)} | {ms(mcb)} | {mcb / mca:.2f} |", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
