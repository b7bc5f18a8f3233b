"""Coverage-guided fuzzing (atheris / libFuzzer) of rtx's argument handling.

    python tools/fuzz_atheris.py [--seconds N] [--asan] [--corpus DIR] [--runs N]

The harness turns libFuzzer's bytes into Python objects (ints of any size,
NaN/inf floats, bools, None, strings, ragged nested lists and tuples, numpy
arrays of every dtype / byte order / stride / alignment / writeability, numpy
scalars, rtx tensors, slices, Ellipsis) and feeds them to the public faces:
``rtx.tensor``, ``index_select`` / ``index_add`` (results checked against
numpy), ``reshape`` / ``view`` / ``expand`` / ``permute`` / ``transpose``,
``Tensor.__getitem__``, the creation functions, ``__dlpack__`` /
``from_dlpack`` arguments, arithmetic with Python scalars and lists,
reductions.

A finding is a crash (signal, sanitizer report) or any exception other than
the documented clean ones: TypeError, ValueError, IndexError, MemoryError,
OverflowError, RuntimeError, NotImplementedError (and BufferError from the
DLPack calls, as the DLPack spec says); also a wrong index_select/index_add
result, or an input the call modified.

The parent process runs the fuzzer in a child (libFuzzer ends the process
with ``exit()``), parses its output and prints executions, coverage (libFuzzer's
``cov:`` = instrumented Python branches of the ``rtx`` package; the Cython
extension is built with gcc, which cannot emit libFuzzer's native coverage, so
its C code is exercised but not coverage-guided) and findings.  Exit status 1
on any finding.  ``--asan`` runs against the ASan + UBSan build that
``tools/asan_job.py`` makes (built here if missing, ``build/asan/src``), with
gcc's ASan runtime preloaded.  There, gcc's libasan (not atheris' libFuzzer)
provides the coverage callbacks, so libFuzzer gets no coverage feedback: the
ASan run replays the corpus (``build/fuzz/corpus``) that the coverage-guided
runs grew and mutates it unguided.  CI runs both: 40 s guided, then 20 s under
ASan.
"""

# ruff: noqa: E731  (the harness picks its call as a lambda per branch)
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLEAN = (TypeError, ValueError, IndexError, MemoryError, OverflowError, RuntimeError,
         NotImplementedError)


# ==================================================================== harness
def _harness() -> None:  # noqa: C901 - one long dispatch is easier to read here
    import atheris

    with atheris.instrument_imports(include=["rtx"]):
        import rtx
        from rtx import _kernels
    import numpy as np

    rtx.set_cache_limit(64 << 20)
    rtx.set_num_threads(2)

    DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.int8, np.uint8,
              np.uint32, np.uint64, np.float16, np.complex64, np.int16, object, ">i8",
              ">f4", "<i4", "U3", "S2", "datetime64[s]"]
    RTX_DTYPES = [None, "float32", "float64", "int32", "int64", "bool", rtx.float32,
                  rtx.int64, np.float32, np.int32, "float16", "int8", "complex64", 3, object,
                  "nonsense", np.dtype(">f8"), float, int, bool]
    HUGE = [2**31, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64, 2**100, -(2**63), -1, -2]

    class Gen:
        def __init__(self, data: bytes) -> None:
            self.f = atheris.FuzzedDataProvider(data)

        def n(self, k: int) -> int:
            return self.f.ConsumeIntInRange(0, k - 1)

        def small(self) -> int:
            return self.f.ConsumeIntInRange(-2, 6)

        def dim(self) -> int:
            r = self.n(16)
            return HUGE[self.n(len(HUGE))] if r == 0 else r % 6

        def anyint(self) -> int:
            r = self.n(8)
            if r == 0:
                return HUGE[self.n(len(HUGE))]
            if r == 1:
                return self.f.ConsumeInt(self.n(20) + 1)
            return self.small()

        def flt(self) -> float:
            r = self.n(6)
            return [float("nan"), float("inf"), -float("inf"), 0.0, -0.0][r] if r < 5 else (
                self.f.ConsumeRegularFloat())

        def shape(self, maxd: int = 4) -> tuple[int, ...]:
            return tuple(self.dim() for _ in range(self.n(maxd + 1)))

        def small_shape(self) -> tuple[int, ...]:
            return tuple(self.n(5) for _ in range(self.n(4)))

        def array(self) -> np.ndarray:
            dt = DTYPES[self.n(len(DTYPES))]
            shp = self.small_shape()
            size = int(np.prod(shp)) if shp else 1
            raw = self.f.ConsumeBytes(size * 8)
            base = np.frombuffer(raw.ljust(size * 8, b"\0"), dtype=np.int64)[:size]
            kind = self.n(4)
            if kind == 0:
                base = base % 7                      # mostly small valid indices
            elif kind == 1:
                base = base % 7 - 2                  # some negative
            try:
                a = base.astype(dt).reshape(shp)
            except (TypeError, ValueError, OverflowError):
                a = base.reshape(shp)
            mod = self.n(8)
            if mod == 1 and a.ndim:
                a = a[::2]
            elif mod == 2 and a.ndim >= 2:
                a = a.T
            elif mod == 3:
                a = a.copy()
                a.setflags(write=False)
            elif mod == 4 and a.dtype.kind in "iuf" and a.ndim:
                buf = np.zeros(a.nbytes + 1, np.uint8)   # misaligned
                m = buf[1:].view(a.dtype).reshape(a.shape)
                m[...] = a
                a = m
            elif mod == 5:
                a = np.broadcast_to(a, (2,) + a.shape)
            return a

        def tensor(self):
            a = self.array()
            try:
                return rtx.tensor(a)
            except CLEAN:
                return rtx.tensor(self.n(3) * 1.0)

        def value(self, depth: int = 0):
            r = self.n(15 if depth < 2 else 8)
            if r == 0:
                return self.anyint()
            if r == 1:
                return self.flt()
            if r == 2:
                return bool(self.n(2))
            if r == 3:
                return None
            if r == 4:
                return self.f.ConsumeUnicodeNoSurrogates(self.n(4))
            if r == 5:
                return np.int64(self.small()) if self.n(2) else np.float32(self.flt())
            if r == 6:
                return self.small()
            if r == 7:
                return [self.small() for _ in range(self.n(5))]
            if r in (8, 9):
                return [self.value(depth + 1) for _ in range(self.n(4))]
            if r == 10:
                return tuple(self.value(depth + 1) for _ in range(self.n(4)))
            if r == 11:
                return self.array()
            if r == 12:
                return self.tensor()
            if r == 13:
                return slice(self.value(depth + 2), self.value(depth + 2), self.value(depth + 2))
            return Ellipsis

        def dtype(self):
            return RTX_DTYPES[self.n(len(RTX_DTYPES))]

    def snapshot_of(v):
        if isinstance(v, np.ndarray):
            return ("a", v.copy())
        if isinstance(v, rtx.Tensor):
            return ("t", v.numpy().copy())
        if isinstance(v, list):
            return ("l", repr(v))
        return None

    def same_array(now, old) -> bool:
        # bitwise: a value comparison calls NaN and NaT unequal to themselves (a
        # datetime64 array holding NaT read as "modified" although nothing wrote it)
        if now.shape != old.shape or now.dtype != old.dtype:
            return False
        if old.dtype.hasobject:
            return all(a is b for a, b in zip(now.ravel().tolist(), old.ravel().tolist(),
                                              strict=True))
        return np.ascontiguousarray(now).tobytes() == old.tobytes()

    def unchanged(v, snap) -> bool:
        if snap is None:
            return True
        kind, old = snap
        if kind == "a":
            return same_array(v, old)
        if kind == "t":
            return same_array(v.numpy(), old)
        return repr(v) == old

    def as_np(v):
        return v.numpy() if isinstance(v, rtx.Tensor) else np.asarray(v)

    def one(data: bytes) -> None:
        g = Gen(data)
        op = g.n(12)
        allowed = CLEAN
        if op == 0:
            v, dt = g.value(), g.dtype()
            s = snapshot_of(v)
            args = [v]
            call = (lambda: rtx.tensor(v, dtype=dt)) if g.n(2) else (lambda: rtx.tensor(v))
        elif op in (1, 2):
            x = g.tensor() if g.n(4) else g.value()
            idx = g.value() if g.n(3) == 0 else (g.array() if g.n(2) else g.tensor())
            nrows = g.anyint() if g.n(2) else g.small()
            s = [snapshot_of(x), snapshot_of(idx)]
            args = [x, idx]

            def call(op=op, x=x, idx=idx, nrows=nrows):
                ref_idx = as_np(idx).copy() if isinstance(idx, (np.ndarray, rtx.Tensor)) else idx
                if op == 1:
                    out = rtx.index_select(x, idx)
                    ref = np.take(as_np(x), np.asarray(ref_idx), axis=0)
                else:
                    out = rtx.index_add(x, idx, nrows)
                    xs = as_np(x)
                    ref = np.zeros((nrows,) + xs.shape[1:], dtype=out.dtype)
                    np.add.at(ref, np.asarray(ref_idx), xs)
                if not isinstance(x, rtx.Tensor):
                    return out
                o = out.numpy()
                if o.shape != ref.shape or not np.allclose(o, ref, equal_nan=True, rtol=1e-5,
                                                            atol=1e-6):
                    raise AssertionError(f"wrong index result {o!r} vs {ref!r}")
                return out
        elif op == 3:
            t = g.tensor()
            shp = g.shape() if g.n(3) else g.value()
            s, args = [snapshot_of(t)], [t]
            how = g.n(5)
            if how == 0:
                call = (lambda: rtx.reshape(t, shp))
            elif how == 1:
                call = (lambda: t.reshape(*shp) if isinstance(shp, tuple) else t.reshape(shp))
            elif how == 2:
                call = (lambda: t.view(shp))
            elif how == 3:
                call = (lambda: t.expand(*shp) if isinstance(shp, tuple) else t.expand(shp))
            else:
                call = (lambda: t.permute(*shp) if isinstance(shp, tuple) else t.permute(shp))
        elif op == 4:
            t = g.tensor()
            key = g.value()
            s, args = [snapshot_of(t)], [t]

            def call(t=t, key=key):
                return t[key]
        elif op == 5:
            fn = [rtx.zeros, rtx.ones, rtx.empty, rtx.randn, rtx.rand][g.n(5)]
            shp = g.shape()
            dt = g.dtype()
            s, args = [], []
            if g.n(3):
                call = (lambda: fn(*shp, dtype=dt))
            else:
                call = (lambda: fn(shp, dtype=dt))
        elif op == 6:
            a, b, c = g.value(), g.value(), g.value()
            dt = g.dtype()
            s, args = [], []
            which = g.n(3)
            if which == 0:
                call = (lambda: rtx.arange(a, b, c, dtype=dt))
            elif which == 1:
                call = (lambda: rtx.full(g.shape(), a, dtype=dt))
            else:
                call = (lambda: rtx.full(a, b, dtype=dt))
        elif op == 7:
            t = g.tensor()
            kw = {}
            for k in ("stream", "max_version", "dl_device", "copy"):
                if g.n(2):
                    kw[k] = g.value()
            s, args = [snapshot_of(t)], [t]
            allowed = CLEAN + (BufferError,)

            def call(t=t, kw=kw):
                cap = t.__dlpack__(**kw)
                assert _kernels.dlpack_capsule_state(cap) == "unused"
                return cap
        elif op == 8:
            src = g.tensor() if g.n(2) else g.array()
            kw = {}
            if g.n(2):
                kw["copy"] = g.value()
            if g.n(4) == 0:
                kw["device"] = g.value()
            s, args = [snapshot_of(src)], [src]
            allowed = CLEAN + (BufferError,)

            def call(src=src, kw=kw):
                out = rtx.from_dlpack(src, **kw)
                if not np.array_equal(out.numpy(), as_np(src), equal_nan=True):
                    raise AssertionError("from_dlpack changed the values")
                return out
        elif op == 9:
            t = g.tensor()
            other = g.value()
            which = g.n(6)
            s, args = [snapshot_of(t), snapshot_of(other)], [t, other]
            fns = [lambda: t + other, lambda: t * other, lambda: other - t,
                   lambda: t / other, lambda: t ** other, lambda: rtx.maximum(t, other)]
            call = fns[which]
        elif op == 10:
            t = g.tensor()
            dim = g.value() if g.n(2) else g.small()
            keep = bool(g.n(2))
            fn = ["sum", "mean", "max", "min", "argmax", "softmax"][g.n(6)]
            s, args = [snapshot_of(t)], [t]
            if fn == "softmax":
                call = (lambda: t.softmax(dim))
            elif fn == "argmax":
                call = (lambda: t.argmax(dim=dim, keepdim=keep))
            else:
                call = (lambda: getattr(t, fn)(dim=dim, keepdim=keep))
        else:
            t = g.tensor()
            a, b = g.value(), g.value()
            s, args = [snapshot_of(t)], [t]
            fns = [lambda: t.transpose(a, b), lambda: t.unsqueeze(a), lambda: t.squeeze(a),
                   lambda: t.flatten(), lambda: t.to(a), lambda: t.sum(a)]
            call = fns[g.n(len(fns))]
        try:
            call()
        except allowed:
            pass
        snaps = s if isinstance(s, list) else [s]
        for v, sn in zip(args, snaps, strict=False):
            if not unchanged(v, sn):
                now = as_np(v) if isinstance(v, (np.ndarray, rtx.Tensor)) else v
                raise AssertionError(f"op {op} modified its input {type(v).__name__}: "
                                     f"{sn[1]!r} became {now!r}")

    import warnings
    warnings.simplefilter("ignore")
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


# ===================================================================== driver
def _asan_env() -> tuple[dict[str, str], str]:
    sys.path.insert(0, HERE)
    import memcheck_env as mc

    base, src, _run = mc.job_dirs("asan")
    so = [f for f in (os.listdir(os.path.join(src, "rtx")) if os.path.isdir(
        os.path.join(src, "rtx")) else []) if f.startswith("_kernels") and f.endswith(".so")]
    if not so:
        print(f"=== fuzz: building the ASan + UBSan rtx in {src}", flush=True)
        mc.stage_package(src)
        mc.build_extension(src, mc.SAN_CFLAGS, mc.SAN_LDFLAGS,
                           log=os.path.join(base, "fuzz-build.log"))
    env = mc.asan_env(mc.pythonpath_for(src))
    return env, src


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--corpus", default=os.path.join(ROOT, "build", "fuzz", "corpus"))
    ap.add_argument("--runs", type=int, default=-1, help="stop after N inputs (-1: time only)")
    ap.add_argument("--seed", type=int, default=0,
                    help="libFuzzer's random seed (0: a fresh one each run; CI fixes one so "
                         "that a red run can be replayed)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.worker:
        sys.argv = [sys.argv[0], *rest]
        _harness()
        return 0
    os.makedirs(args.corpus, exist_ok=True)
    args.corpus = os.path.abspath(args.corpus)
    art = os.path.join(ROOT, "build", "fuzz", "findings") + os.sep
    os.makedirs(art, exist_ok=True)
    if args.asan:
        env, where = _asan_env()
    else:
        env = dict(os.environ)
        if any(f.startswith("_kernels") and f.endswith((".so", ".pyd"))
               for f in os.listdir(os.path.join(ROOT, "rtx"))):
            # an in-place build of this tree
            env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep)
        # else the installed rtx (CI: pip install .)
        probe = subprocess.run([sys.executable, "-c", "import rtx; print(rtx.__file__)"],
                               env=env, cwd=os.path.join(ROOT, "build"), capture_output=True,
                               text=True)
        if probe.returncode != 0:
            print(probe.stderr)
            return 1
        where = os.path.dirname(os.path.dirname(probe.stdout.strip()))
    env["PYTHONFAULTHANDLER"] = "1"
    if args.seed:
        env["PYTHONHASHSEED"] = str(args.seed)   # set iteration order too
    cmd = [sys.executable, os.path.abspath(__file__), "--worker",
           f"-max_total_time={args.seconds}", f"-runs={args.runs}", f"-seed={args.seed}",
           f"-rss_limit_mb={4096 if args.asan else 2048}", "-timeout=20", "-print_final_stats=1",
           f"-artifact_prefix={art}", args.corpus]
    if not args.asan:
        # the address space is capped at 1.5 GiB (the harness needs ~0.25): a
        # huge-but-possible request fails (MemoryError) instead of zero-filling
        # gigabytes on a shared machine
        import resource
        lim = 3 << 29

        def pre() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    else:
        env["ASAN_OPTIONS"] += ":max_allocation_size_mb=1024"
        pre = None  # type: ignore[assignment]
    print(f"=== fuzz: {args.seconds} s against the rtx in {where}"
          f"{' (ASan + UBSan)' if args.asan else ''}, seed {args.seed or 'random'}",
          flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=os.path.join(ROOT, "build"), capture_output=True,
                       text=True,
                       errors="replace", preexec_fn=pre, timeout=args.seconds * 3 + 300)
    out = p.stdout + p.stderr
    log = os.path.join(ROOT, "build", "fuzz", "last-asan.log" if args.asan else "last.log")
    with open(log, "w") as fh:
        fh.write(out)
    runs = re.findall(r"Done (\d+) runs", out) or re.findall(r"#(\d+)\s", out)
    cov = re.findall(r"cov: (\d+)", out)
    ft = re.findall(r"ft: (\d+)", out)
    corp = re.findall(r"corp: (\d+)", out)
    crash = re.search(r"(Uncaught Python exception|ERROR: AddressSanitizer|runtime error:|"
                      r"deadly signal|ERROR: libFuzzer|Segmentation fault|SUMMARY: )", out)
    print(f"=== fuzz: executions {runs[-1] if runs else '?'}, coverage (cov) "
          f"{cov[-1] if cov else '?'}, features (ft) {ft[-1] if ft else '?'}, corpus "
          f"{corp[-1] if corp else '?'} inputs, {time.perf_counter() - t0:.0f} s, "
          f"exit {p.returncode}")
    if args.asan and not cov:
        print("=== fuzz: no coverage feedback under the ASan build: gcc's libasan provides the "
              "coverage symbols, so atheris mutates unguided (replaying the corpus the "
              "coverage-guided runs grew, then random mutations of it)")
    if crash or p.returncode != 0:
        print(f"=== fuzz: FINDING (log: {os.path.relpath(log, ROOT)}, inputs: "
              "build/fuzz/findings/)")
        i = out.find(crash.group(0)) if crash else max(0, len(out) - 4000)
        print(out[max(0, i - 2000):i + 4000])
        return 1
    print("=== fuzz: no findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
