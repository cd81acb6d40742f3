"""Speed of ``torchfw.datasets.load_svmlight`` against scikit-learn's ``load_svmlight_file``.

Usage::

    python benchmarks/svmlight_loader.py                 # default files, 5 interleaved repeats
    python benchmarks/svmlight_loader.py --repeat 9 a9a sector.scale

For every file of the shared data folder (``../shared/data`` or ``$TORCHFW_DATA``), four loads
are timed, interleaved, ``--repeat`` times each (wall clock, median and minimum reported):

- ``torchfw xz``: ``load_svmlight("FILE.xz")`` (decompression included);
- ``sklearn xz``: ``load_svmlight_file(lzma.open("FILE.xz"))``, the same work for scikit-learn;
- ``torchfw txt`` and ``sklearn txt``: the same on a decompressed copy in a temporary folder
  (parsing alone).

Both readers produce float64 values here, and the outputs are checked to be identical (same
indptr, indices, and bit-for-bit values) before anything is timed. The parsing cache of
``benchmarks/_data.py`` is not involved. Writes ``benchmarks/results/svmlight_loader.md`` and
``.json``; the load average at start and end is recorded, because a busy machine slows both
readers.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import dataset_path  # noqa: E402

from torchfw.datasets import load_svmlight, to_scipy_csr  # noqa: E402

DEFAULT = ["a9a", "a9a.t", "w8a", "dna.scale", "letter.scale", "usps.t", "news20",
           "sector.t.scale", "sector.scale"]


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    from sklearn.datasets import load_svmlight_file

    meta = {"python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "cpus": os.cpu_count(),
            "load_average_start": os.getloadavg(), "repeat": args.repeat}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.files:
            packed = dataset_path(name)
            plain = Path(tmp) / name
            with lzma.open(packed) if packed.suffix == ".xz" else open(packed, "rb") as f:
                plain.write_bytes(f.read())
            # Same result first: indptr, indices and bit-identical float64 values.
            X, y = load_svmlight(packed, dtype=torch.float64)
            ref_X, ref_y = load_svmlight_file(str(plain), n_features=X.shape[1])
            A = to_scipy_csr(X)
            same = (np.array_equal(A.indptr, ref_X.indptr)
                    and np.array_equal(A.indices, ref_X.indices)
                    and A.data.tobytes() == ref_X.data.tobytes()
                    and np.array_equal(y.numpy(), ref_y))
            if not same:
                raise SystemExit(f"{name}: torchfw and scikit-learn disagree")
            runs = {
                "torchfw xz": lambda p=packed: load_svmlight(p, dtype=torch.float64),
                "sklearn xz": lambda p=packed: load_svmlight_file(lzma.open(p)),
                "torchfw txt": lambda p=plain: load_svmlight(p, dtype=torch.float64),
                "sklearn txt": lambda p=plain: load_svmlight_file(str(p)),
            }
            times = {k: [] for k in runs}
            for _ in range(args.repeat):
                for key, fn in runs.items():
                    times[key].append(_time(fn))
            row = {"file": name, "rows": X.shape[0], "features": X.shape[1],
                   "nnz": int(A.nnz), "text_MB": plain.stat().st_size / 1e6}
            for key, ts in times.items():
                row[f"{key} median"] = statistics.median(ts)
                row[f"{key} min"] = min(ts)
            rows.append(row)
            print(f"{name:16s} {X.shape[0]:7d} x {X.shape[1]:6d}  "
                  + "  ".join(f"{k} {row[k + ' median']:.3f}s" for k in runs)
                  + f"  speed-up txt {row['sklearn txt median'] / row['torchfw txt median']:.1f}x"
                  + f"  xz {row['sklearn xz median'] / row['torchfw xz median']:.1f}x",
                  flush=True)
    meta["load_average_end"] = os.getloadavg()

    lines = [
        "# LIBSVM reader: torchfw.datasets.load_svmlight vs sklearn load_svmlight_file", "",
        f"`python benchmarks/svmlight_loader.py --repeat {args.repeat}`; wall-clock seconds, "
        f"median (min) of {args.repeat} interleaved runs; float64 values, outputs checked "
        f"identical. Python {meta['python']}, torch {meta['torch']}, NumPy {meta['numpy']}, "
        f"{meta['cpus']} CPUs, load average {meta['load_average_start'][0]:.2f} at start and "
        f"{meta['load_average_end'][0]:.2f} at end.", "",
        "| file | rows x features | nnz | text MB | torchfw .xz | sklearn .xz | speed-up | "
        "torchfw text | sklearn text | speed-up |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    def cell(r, k):
        return f"{r[k + ' median']:.3f} ({r[k + ' min']:.3f})"

    for r in rows:
        lines.append(
            f"| {r['file']} | {r['rows']} x {r['features']} | {r['nnz']} | {r['text_MB']:.1f} | "
            f"{cell(r, 'torchfw xz')} | {cell(r, 'sklearn xz')} | "
            f"{r['sklearn xz median'] / r['torchfw xz median']:.1f}x | {cell(r, 'torchfw txt')} | "
            f"{cell(r, 'sklearn txt')} | "
            f"{r['sklearn txt median'] / r['torchfw txt median']:.1f}x |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "svmlight_loader.md").write_text("\n".join(lines) + "\n")
    (args.out / "svmlight_loader.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                              indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
